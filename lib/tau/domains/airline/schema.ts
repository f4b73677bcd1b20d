/**
 * tau2's airline schema (flights with a status per date, users with payment methods and saved
 * passengers, reservations), the copy-on-write database over it and tau2's canonical hash.
 *
 * Entities are normalised to the field order of tau2's pydantic models (what `model_dump()`
 * gives, so tool results print like tau2's) and frozen. Numbers follow the models' types:
 * seats, prices, payment amounts and bag counts are Python `int`s, gift-card and certificate
 * balances `float`s (`100.0`).
 * @module
 */
import { createHash } from 'node:crypto';

import { canonicalCache, CowMap, cowMapsEqual, deepFreeze, sortedTableJSON } from '../../cow.js';
import type { WorldState } from '../../domain.js';
import { jsonReaders, type JsonReaders } from '../../json-check.js';
import { pyJsonDumps, pyJsonString } from '../../pyjson.js';

/** Cabin classes. */
export type CabinClass = 'business' | 'economy' | 'basic_economy';
/** All cabin classes. */
export const CABIN_CLASSES: readonly CabinClass[] = ['business', 'economy', 'basic_economy'];
/** Trip types. */
export type FlightType = 'round_trip' | 'one_way';
/** All trip types. */
export const FLIGHT_TYPES: readonly FlightType[] = ['round_trip', 'one_way'];
/** Whether travel insurance was bought. */
export type Insurance = 'yes' | 'no';
/** Membership levels. */
export type MembershipLevel = 'gold' | 'silver' | 'regular';

/** Seats or prices per cabin class (Python ints; key order as in the data). */
export type CabinNumbers = Readonly<Partial<Record<CabinClass, number>>>;

/** A flight date open for booking. */
export interface FlightDateAvailable {
  /** Tag. */
  readonly status: 'available';
  /** Free seats per cabin. */
  readonly available_seats: CabinNumbers;
  /** Price per seat per cabin. */
  readonly prices: CabinNumbers;
}
/** A flight date that has landed. */
export interface FlightDateLanded {
  /** Tag. */
  readonly status: 'landed';
  /** `YYYY-MM-DDTHH:MM:SS` (EST). */
  readonly actual_departure_time_est: string;
  /** `YYYY-MM-DDTHH:MM:SS` (EST). */
  readonly actual_arrival_time_est: string;
}
/** A cancelled flight date. */
export interface FlightDateCancelled {
  /** Tag. */
  readonly status: 'cancelled';
}
/** A delayed flight date. */
export interface FlightDateDelayed {
  /** Tag. */
  readonly status: 'delayed';
  /** `YYYY-MM-DDTHH:MM:SS` (EST). */
  readonly estimated_departure_time_est: string;
  /** `YYYY-MM-DDTHH:MM:SS` (EST). */
  readonly estimated_arrival_time_est: string;
}
/** A flight date in the air. */
export interface FlightDateFlying {
  /** Tag. */
  readonly status: 'flying';
  /** `YYYY-MM-DDTHH:MM:SS` (EST). */
  readonly actual_departure_time_est: string;
  /** `YYYY-MM-DDTHH:MM:SS` (EST). */
  readonly estimated_arrival_time_est: string;
}
/** A flight date on time. */
export interface FlightDateOnTime {
  /** Tag. */
  readonly status: 'on time';
  /** `YYYY-MM-DDTHH:MM:SS` (EST). */
  readonly estimated_departure_time_est: string;
  /** `YYYY-MM-DDTHH:MM:SS` (EST). */
  readonly estimated_arrival_time_est: string;
}
/** A flight's status on one date (tagged on `status`). */
export type FlightDateStatus =
  | FlightDateAvailable
  | FlightDateLanded
  | FlightDateCancelled
  | FlightDateDelayed
  | FlightDateFlying
  | FlightDateOnTime;

/** A scheduled flight with its status per date. */
export interface Flight {
  /** E.g. `HAT001`. */
  readonly flight_number: string;
  /** Origin IATA code. */
  readonly origin: string;
  /** Destination IATA code. */
  readonly destination: string;
  /** `HH:MM:SS` (EST). */
  readonly scheduled_departure_time_est: string;
  /** `HH:MM:SS` (EST), with `+1` when it lands the next day. */
  readonly scheduled_arrival_time_est: string;
  /** Status by date (`YYYY-MM-DD`). */
  readonly dates: Readonly<Record<string, FlightDateStatus>>;
}

/** A postal address (`address2` may be null). */
export interface AirlineAddress {
  /** Street line. */
  readonly address1: string;
  /** Second line, or null. */
  readonly address2: string | null;
  /** City. */
  readonly city: string;
  /** Country. */
  readonly country: string;
  /** State. */
  readonly state: string;
  /** Zip code. */
  readonly zip: string;
}

/** A saved credit card. */
export interface AirlineCreditCard {
  /** Tag. */
  readonly source: 'credit_card';
  /** E.g. `credit_card_4421486`. */
  readonly id: string;
  /** Brand. */
  readonly brand: string;
  /** Last four digits. */
  readonly last_four: string;
}
/** A gift card with a balance (a Python float). */
export interface AirlineGiftCard {
  /** Tag. */
  readonly source: 'gift_card';
  /** E.g. `gift_card_3576581`. */
  readonly id: string;
  /** Balance. */
  readonly amount: number;
}
/** A travel certificate with a value (a Python float); used up by one booking. */
export interface Certificate {
  /** Tag. */
  readonly source: 'certificate';
  /** E.g. `certificate_4856383`. */
  readonly id: string;
  /** Value. */
  readonly amount: number;
}
/** A saved payment method (tagged on `source`). */
export type AirlinePaymentMethod = AirlineCreditCard | AirlineGiftCard | Certificate;

/** A traveller. */
export interface Passenger {
  /** First name. */
  readonly first_name: string;
  /** Last name. */
  readonly last_name: string;
  /** `YYYY-MM-DD`. */
  readonly dob: string;
}

/** An airline customer. */
export interface AirlineUser {
  /** E.g. `mia_li_3668`. */
  readonly user_id: string;
  /** Name. */
  readonly name: { readonly first_name: string; readonly last_name: string };
  /** Address. */
  readonly address: AirlineAddress;
  /** Email. */
  readonly email: string;
  /** `YYYY-MM-DD`. */
  readonly dob: string;
  /** Payment methods by id. */
  readonly payment_methods: Readonly<Record<string, AirlinePaymentMethod>>;
  /** Saved passengers. */
  readonly saved_passengers: readonly Passenger[];
  /** Membership level. */
  readonly membership: MembershipLevel;
  /** Reservation ids. */
  readonly reservations: readonly string[];
}

/** One flight of a reservation, with the price paid per passenger. */
export interface ReservationFlight {
  /** Flight number. */
  readonly flight_number: string;
  /** Origin IATA code. */
  readonly origin: string;
  /** Destination IATA code. */
  readonly destination: string;
  /** `YYYY-MM-DD`. */
  readonly date: string;
  /** Price per passenger (int). */
  readonly price: number;
}

/** A payment (positive) or refund (negative) of a reservation. */
export interface AirlinePayment {
  /** The payment method id. */
  readonly payment_id: string;
  /** Amount in dollars (int). */
  readonly amount: number;
}

/** A reservation. */
export interface Reservation {
  /** Six characters, e.g. `4WQ150`. */
  readonly reservation_id: string;
  /** Owner. */
  readonly user_id: string;
  /** Trip origin. */
  readonly origin: string;
  /** Trip destination. */
  readonly destination: string;
  /** Trip type. */
  readonly flight_type: FlightType;
  /** Cabin. */
  readonly cabin: CabinClass;
  /** Flights. */
  readonly flights: readonly ReservationFlight[];
  /** Passengers. */
  readonly passengers: readonly Passenger[];
  /** Payments and refunds. */
  readonly payment_history: readonly AirlinePayment[];
  /** `YYYY-MM-DDTHH:MM:SS`. */
  readonly created_at: string;
  /** Bags. */
  readonly total_baggages: number;
  /** Paid bags. */
  readonly nonfree_baggages: number;
  /** Insurance. */
  readonly insurance: Insurance;
  /** `cancelled`, or null. */
  readonly status: 'cancelled' | null;
}

/** The airline database as plain JSON (the shape of tau2's `db.json`). */
export interface AirlineData {
  /** Flights by number. */
  flights: Record<string, Flight>;
  /** Users by id. */
  users: Record<string, AirlineUser>;
  /** Reservations by id. */
  reservations: Record<string, Reservation>;
}

const readers = jsonReaders('airline db');
const fail: JsonReaders['fail'] = readers.fail; // explicitly typed so that TypeScript narrows after it
const { str, int, num, obj, arr, strList, optStr, oneOf } = readers;

function cabinNumbers(v: unknown, where: string): CabinNumbers {
  const out: Partial<Record<CabinClass, number>> = {};
  for (const [k, x] of Object.entries(obj(v, where)))
    out[oneOf(k, CABIN_CLASSES, `${where} key`)] = int(x, `${where}.${k}`);
  return out;
}

function toDateStatus(v: unknown, where: string): FlightDateStatus {
  const o = obj(v, where);
  const t = (k: string) => str(o[k], `${where}.${k}`);
  switch (o.status) {
    case 'available':
      return {
        status: 'available',
        available_seats: cabinNumbers(o.available_seats, `${where}.available_seats`),
        prices: cabinNumbers(o.prices, `${where}.prices`),
      };
    case 'landed':
      return {
        status: 'landed',
        actual_departure_time_est: t('actual_departure_time_est'),
        actual_arrival_time_est: t('actual_arrival_time_est'),
      };
    case 'cancelled':
      return { status: 'cancelled' };
    case 'delayed':
      return {
        status: 'delayed',
        estimated_departure_time_est: t('estimated_departure_time_est'),
        estimated_arrival_time_est: t('estimated_arrival_time_est'),
      };
    case 'flying':
      return {
        status: 'flying',
        actual_departure_time_est: t('actual_departure_time_est'),
        estimated_arrival_time_est: t('estimated_arrival_time_est'),
      };
    case 'on time':
      return {
        status: 'on time',
        estimated_departure_time_est: t('estimated_departure_time_est'),
        estimated_arrival_time_est: t('estimated_arrival_time_est'),
      };
    default:
      return fail(`${where}.status`, `unknown flight status ${JSON.stringify(o.status)}`);
  }
}

function toFlight(v: unknown, where: string): Flight {
  const o = obj(v, where);
  const dates: Record<string, FlightDateStatus> = {};
  for (const [d, x] of Object.entries(obj(o.dates, `${where}.dates`)))
    dates[d] = toDateStatus(x, `${where}.dates.${d}`);
  return {
    flight_number: str(o.flight_number, `${where}.flight_number`),
    origin: str(o.origin, `${where}.origin`),
    destination: str(o.destination, `${where}.destination`),
    scheduled_departure_time_est: str(o.scheduled_departure_time_est, `${where}.scheduled_departure_time_est`),
    scheduled_arrival_time_est: str(o.scheduled_arrival_time_est, `${where}.scheduled_arrival_time_est`),
    dates,
  };
}

/** Normalises a passenger (tau2 field order; other fields dropped, as pydantic ignores them). */
export function toPassenger(v: unknown, where = 'passenger'): Passenger {
  const o = obj(v, where);
  return {
    first_name: str(o.first_name, `${where}.first_name`),
    last_name: str(o.last_name, `${where}.last_name`),
    dob: str(o.dob, `${where}.dob`),
  };
}

function toPaymentMethod(v: unknown, where: string): AirlinePaymentMethod {
  const o = obj(v, where);
  const id = str(o.id, `${where}.id`);
  switch (o.source) {
    case 'credit_card':
      return {
        source: 'credit_card',
        id,
        brand: str(o.brand, `${where}.brand`),
        last_four: str(o.last_four, `${where}.last_four`),
      };
    case 'gift_card':
      return { source: 'gift_card', id, amount: num(o.amount, `${where}.amount`) };
    case 'certificate':
      return { source: 'certificate', id, amount: num(o.amount, `${where}.amount`) };
    default:
      return fail(`${where}.source`, `unknown payment source ${JSON.stringify(o.source)}`);
  }
}

function toUser(v: unknown, where: string): AirlineUser {
  const o = obj(v, where);
  const name = obj(o.name, `${where}.name`);
  const a = obj(o.address, `${where}.address`);
  const pms: Record<string, AirlinePaymentMethod> = {};
  for (const [k, x] of Object.entries(obj(o.payment_methods, `${where}.payment_methods`)))
    pms[k] = toPaymentMethod(x, `${where}.payment_methods.${k}`);
  return {
    user_id: str(o.user_id, `${where}.user_id`),
    name: {
      first_name: str(name.first_name, `${where}.name.first_name`),
      last_name: str(name.last_name, `${where}.name.last_name`),
    },
    address: {
      address1: str(a.address1, `${where}.address.address1`),
      address2: optStr(a.address2, `${where}.address.address2`),
      city: str(a.city, `${where}.address.city`),
      country: str(a.country, `${where}.address.country`),
      state: str(a.state, `${where}.address.state`),
      zip: str(a.zip, `${where}.address.zip`),
    },
    email: str(o.email, `${where}.email`),
    dob: str(o.dob, `${where}.dob`),
    payment_methods: pms,
    saved_passengers: arr(o.saved_passengers, `${where}.saved_passengers`).map((x, i) =>
      toPassenger(x, `${where}.saved_passengers[${i}]`),
    ),
    membership: oneOf(o.membership, ['gold', 'silver', 'regular'] as const, `${where}.membership`),
    reservations: strList(o.reservations, `${where}.reservations`),
  };
}

function toReservation(v: unknown, where: string): Reservation {
  const o = obj(v, where);
  if (o.status !== undefined && o.status !== null && o.status !== 'cancelled')
    fail(`${where}.status`, `expected "cancelled" or null, got ${JSON.stringify(o.status)}`);
  return {
    reservation_id: str(o.reservation_id, `${where}.reservation_id`),
    user_id: str(o.user_id, `${where}.user_id`),
    origin: str(o.origin, `${where}.origin`),
    destination: str(o.destination, `${where}.destination`),
    flight_type: oneOf(o.flight_type, FLIGHT_TYPES, `${where}.flight_type`),
    cabin: oneOf(o.cabin, CABIN_CLASSES, `${where}.cabin`),
    flights: arr(o.flights, `${where}.flights`).map((x, i) => {
      const w = `${where}.flights[${i}]`;
      const f = obj(x, w);
      return {
        flight_number: str(f.flight_number, `${w}.flight_number`),
        origin: str(f.origin, `${w}.origin`),
        destination: str(f.destination, `${w}.destination`),
        date: str(f.date, `${w}.date`),
        price: int(f.price, `${w}.price`),
      };
    }),
    passengers: arr(o.passengers, `${where}.passengers`).map((x, i) => toPassenger(x, `${where}.passengers[${i}]`)),
    payment_history: arr(o.payment_history, `${where}.payment_history`).map((x, i) => {
      const w = `${where}.payment_history[${i}]`;
      const p = obj(x, w);
      return { payment_id: str(p.payment_id, `${w}.payment_id`), amount: int(p.amount, `${w}.amount`) };
    }),
    created_at: str(o.created_at, `${where}.created_at`),
    total_baggages: int(o.total_baggages, `${where}.total_baggages`),
    nonfree_baggages: int(o.nonfree_baggages, `${where}.nonfree_baggages`),
    insurance: oneOf(o.insurance, ['yes', 'no'] as const, `${where}.insurance`),
    status: o.status === 'cancelled' ? 'cancelled' : null,
  };
}

/** The airline tables. */
export type AirlineTable = 'flights' | 'users' | 'reservations';
const TABLES: readonly AirlineTable[] = ['flights', 'reservations', 'users']; // sorted, as sort_keys orders them

/** Validates and normalises one entity of a table (used for `initialization_data` patches). */
export function normalizeAirlineEntity(
  table: AirlineTable,
  value: unknown,
  where: string,
): Flight | AirlineUser | Reservation {
  return deepFreeze(
    table === 'flights'
      ? toFlight(value, where)
      : table === 'users'
        ? toUser(value, where)
        : toReservation(value, where),
  );
}

/** `json.dumps` of a user as tau2 prints it (payment balances are floats). */
export function userJSON(user: AirlineUser, sortKeys = false): string {
  return pyJsonDumps(user, { sortKeys, numbers: 'float' });
}

/** `json.dumps` of a flight, a reservation or search results as tau2 prints them (every number an int). */
export function intJSON(value: unknown, sortKeys = false): string {
  return pyJsonDumps(value, { sortKeys, numbers: 'int' });
}

const canonicalUser = canonicalCache((u: AirlineUser) => userJSON(u, true));
const canonicalInt = canonicalCache((e: object) => intJSON(e, true));

/** The airline database: copy-on-write tables of frozen entities. */
export class AirlineDb implements WorldState {
  /** Flights by number. */
  readonly flights: CowMap<Flight>;
  /** Users by id. */
  readonly users: CowMap<AirlineUser>;
  /** Reservations by id. */
  readonly reservations: CowMap<Reservation>;

  private constructor(flights: CowMap<Flight>, users: CowMap<AirlineUser>, reservations: CowMap<Reservation>) {
    this.flights = flights;
    this.users = users;
    this.reservations = reservations;
  }

  /**
   * Validates and normalises JSON in tau2's `db.json` shape (field order as tau2's models,
   * missing optional fields as null) and freezes it. Throws a TypeError naming a bad field.
   */
  static fromJSON(data: unknown): AirlineDb {
    const root = obj(data, 'root');
    for (const k of Object.keys(root))
      if (!TABLES.includes(k as AirlineTable)) fail(k, 'unknown table (tau2 forbids extra fields here)');
    const flights: Record<string, Flight> = {};
    for (const [k, v] of Object.entries(obj(root.flights, 'flights'))) flights[k] = toFlight(v, `flights.${k}`);
    const users: Record<string, AirlineUser> = {};
    for (const [k, v] of Object.entries(obj(root.users, 'users'))) users[k] = toUser(v, `users.${k}`);
    const reservations: Record<string, Reservation> = {};
    for (const [k, v] of Object.entries(obj(root.reservations, 'reservations')))
      reservations[k] = toReservation(v, `reservations.${k}`);
    return new AirlineDb(
      new CowMap(deepFreeze(flights)),
      new CowMap(deepFreeze(users)),
      new CowMap(deepFreeze(reservations)),
    );
  }

  /** A copy sharing every unchanged entity (O(changed entities)). */
  fork(): this {
    return new AirlineDb(this.flights.fork(), this.users.fork(), this.reservations.fork()) as this;
  }

  /** Replaces (or adds) a flight (frozen). */
  putFlight(flight: Flight): void {
    this.flights.set(flight.flight_number, deepFreeze(flight));
  }

  /** Replaces (or adds) a user (frozen). */
  putUser(user: AirlineUser): void {
    this.users.set(user.user_id, deepFreeze(user));
  }

  /** Replaces (or adds) a reservation (frozen). */
  putReservation(reservation: Reservation): void {
    this.reservations.set(reservation.reservation_id, deepFreeze(reservation));
  }

  private tableJSON(t: AirlineTable): string {
    return t === 'users'
      ? sortedTableJSON(this.users, canonicalUser)
      : sortedTableJSON(this[t] as CowMap<object>, canonicalInt);
  }

  /** The canonical JSON tau2 hashes: `json.dumps(model_dump(), sort_keys=True, default=str)`. */
  canonicalJSON(): string {
    return `{${TABLES.map((t) => `${pyJsonString(t)}: ${this.tableJSON(t)}`).join(', ')}}`;
  }

  /** SHA-256 (hex) of {@link canonicalJSON}: tau2's `get_db_hash()`. */
  hash(): string {
    return createHash('sha256').update(this.canonicalJSON(), 'utf8').digest('hex');
  }

  /** Whether the canonical JSON equals `other`'s (fast: unchanged entities are compared by reference). */
  equals(other: this): boolean {
    const checks = [
      cowMapsEqual(this.flights, other.flights, canonicalInt),
      cowMapsEqual(this.reservations, other.reservations, canonicalInt),
      cowMapsEqual(this.users, other.users, canonicalUser),
    ];
    if (checks.includes(undefined)) return this.canonicalJSON() === other.canonicalJSON();
    return checks.every((c) => c === true);
  }

  /** Plain JSON data (entities shared, frozen). */
  toJSON(): AirlineData {
    return {
      flights: this.flights.toObject(),
      users: this.users.toObject(),
      reservations: this.reservations.toObject(),
    };
  }

  /** tau2's `get_statistics()`: flights, flight dates, users, reservations. */
  statistics(): { num_flights: number; num_flights_instances: number; num_users: number; num_reservations: number } {
    let instances = 0;
    for (const f of this.flights.values()) instances += Object.keys(f.dates).length;
    return {
      num_flights: this.flights.size,
      num_flights_instances: instances,
      num_users: this.users.size,
      num_reservations: this.reservations.size,
    };
  }
}
