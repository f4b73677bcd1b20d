/**
 * The 14 airline agent tools with tau2's arguments, checks (in tau2's order), effects, return
 * values and error messages.
 *
 * As in tau2: the current time is `2024-05-15T15:00:00`; new reservations are `HATHAT`,
 * `HATHAU`, `HATHAV` (a fourth fails); new certificates `certificate_3221322` … `_3221324`;
 * cancelling refunds every payment in the history but does not credit gift cards, release
 * seats or check the reservation's status; changing flights does not change seat counts;
 * `search_onestop_flight` looks for the second leg of an overnight first leg on
 * `2024-05-<day + 1>` (no zero padding, month kept). Rules that are policy only (no cabin
 * change on basic economy, the 24-hour cancellation window…) are not enforced by the tools:
 * the agent must follow them and grading sees the database.
 * @module
 */
import { z } from 'zod';

import { pyNumberStr } from '../../pyjson.js';
import type { Tool } from '../../tools.js';
import { defineTool, ToolError, Toolkit } from '../../tools.js';
import { calculate } from '../retail/calculate.js';
import type {
  AirlineDb,
  AirlinePayment,
  AirlinePaymentMethod,
  AirlineUser,
  CabinClass,
  Flight,
  FlightDateAvailable,
  FlightDateStatus,
  Reservation,
  ReservationFlight,
} from './schema.js';
import { CABIN_CLASSES, FLIGHT_TYPES, intJSON, toPassenger, userJSON } from './schema.js';

/** tau2's fixed current time in the airline domain. */
export const AIRLINE_NOW = '2024-05-15T15:00:00';
const NEW_RESERVATION_IDS = ['HATHAT', 'HATHAU', 'HATHAV'];
const NEW_CERTIFICATE_IDS = ['certificate_3221322', 'certificate_3221323', 'certificate_3221324'];

/** The airports `list_all_airports` returns (IATA code and city), in tau2's order. */
export const AIRLINE_AIRPORTS: readonly { readonly iata: string; readonly city: string }[] = Object.freeze(
  (
    [
      ['SFO', 'San Francisco'],
      ['JFK', 'New York'],
      ['LAX', 'Los Angeles'],
      ['ORD', 'Chicago'],
      ['DFW', 'Dallas'],
      ['DEN', 'Denver'],
      ['SEA', 'Seattle'],
      ['ATL', 'Atlanta'],
      ['MIA', 'Miami'],
      ['BOS', 'Boston'],
      ['PHX', 'Phoenix'],
      ['IAH', 'Houston'],
      ['LAS', 'Las Vegas'],
      ['MCO', 'Orlando'],
      ['EWR', 'Newark'],
      ['CLT', 'Charlotte'],
      ['MSP', 'Minneapolis'],
      ['DTW', 'Detroit'],
      ['PHL', 'Philadelphia'],
      ['LGA', 'LaGuardia'],
    ] as const
  ).map(([iata, city]) => Object.freeze({ iata, city })),
);

const RESERVATION_ID = z.string().describe("The reservation id, such as 'ZFA04Y'.");
const USER_ID = z.string().describe("The user id, such as 'sara_doe_496'.");
const PAYMENT_ID = z
  .string()
  .describe(
    "A payment method id from the user's profile, such as 'credit_card_7815826', 'gift_card_7815826' or 'certificate_7815826'.",
  );
const CABIN = z.enum(CABIN_CLASSES as [CabinClass, ...CabinClass[]]);
const INT = z.number().int();
const AIRPORT = (what: string, example: string) =>
  z.string().describe(`The ${what} airport's three-letter IATA code, such as '${example}'.`);
const DATE = z.string().describe("The date in the format 'YYYY-MM-DD', such as '2024-05-01'.");
// Nested objects drop unknown fields, as tau2's pydantic models do.
const FLIGHT_INFO = z.object({
  flight_number: z.string().describe("The flight number, such as 'HAT001'."),
  date: DATE,
});
const PASSENGER = z.object({
  first_name: z.string().describe("The passenger's first name."),
  last_name: z.string().describe("The passenger's last name."),
  dob: z.string().describe("The passenger's date of birth, 'YYYY-MM-DD'."),
});
const PAYMENT = z.object({
  payment_id: z.string().describe("A payment method id from the user's profile."),
  amount: INT.describe('The amount in dollars paid with this method.'),
});

function getUser(db: AirlineDb, id: string): AirlineUser {
  const u = db.users.get(id);
  if (!u) throw new ToolError(`User ${id} not found`);
  return u;
}
function getReservation(db: AirlineDb, id: string): Reservation {
  const r = db.reservations.get(id);
  if (!r) throw new ToolError(`Reservation ${id} not found`);
  return r;
}
function getFlight(db: AirlineDb, flightNumber: string): Flight {
  const f = db.flights.get(flightNumber);
  if (!f) throw new ToolError(`Flight ${flightNumber} not found`);
  return f;
}
function getInstance(flight: Flight, date: string): FlightDateStatus {
  if (!Object.prototype.hasOwnProperty.call(flight.dates, date))
    throw new ToolError(`Flight ${flight.flight_number} not found on date ${date}`);
  return flight.dates[date];
}
/** `d[cabin]` of a seats or prices dict: a missing key is Python's KeyError, printed as `'cabin'`. */
function perCabin(values: FlightDateAvailable['prices'], cabin: CabinClass): number {
  const v = values[cabin];
  if (v === undefined) throw new ToolError(`'${cabin}'`);
  return v;
}

/** A bookable flight date of `flightNumber`, checked in tau2's order: exists, on that date, available, enough seats. */
function bookable(
  db: AirlineDb,
  flightNumber: string,
  date: string,
  cabin: CabinClass,
  seats: number,
): { flight: Flight; instance: FlightDateAvailable } {
  const flight = getFlight(db, flightNumber);
  const instance = getInstance(flight, date);
  if (instance.status !== 'available') throw new ToolError(`Flight ${flightNumber} not available on date ${date}`);
  if (perCabin(instance.available_seats, cabin) < seats)
    throw new ToolError(`Not enough seats on flight ${flightNumber}`);
  return { flight, instance };
}

function withPaymentMethod(user: AirlineUser, pm: AirlinePaymentMethod): AirlineUser {
  return { ...user, payment_methods: { ...user.payment_methods, [pm.id]: pm } };
}

/**
 * tau2's `_payment_for_update`: checks the method (exists, not a certificate, a gift card
 * covers `total`), takes `total` off a gift card (a refund when negative) and returns the
 * payment to record (none for 0). Writes the user back only when a gift card changed.
 */
function payForUpdate(db: AirlineDb, user: AirlineUser, paymentId: string, total: number): AirlinePayment | null {
  if (!Object.prototype.hasOwnProperty.call(user.payment_methods, paymentId))
    throw new ToolError('Payment method not found');
  const pm = user.payment_methods[paymentId];
  if (pm.source === 'certificate') throw new ToolError('Certificate cannot be used to update reservation');
  if (pm.source === 'gift_card' && pm.amount < total) throw new ToolError('Gift card balance is not enough');
  if (pm.source === 'gift_card') db.putUser(withPaymentMethod(user, { ...pm, amount: pm.amount - total }));
  return total !== 0 ? { payment_id: paymentId, amount: total } : null;
}

/** Python's `int(s)` for the day of a date (digits with optional sign and surrounding spaces). */
function pyInt(s: string): number {
  if (!/^\s*[+-]?\d+\s*$/.test(s)) throw new ToolError(`invalid literal for int() with base 10: '${s}'`);
  return Number.parseInt(s.trim(), 10);
}

interface DirectFlight {
  flight_number: string;
  origin: string;
  destination: string;
  status: 'available';
  scheduled_departure_time_est: string;
  scheduled_arrival_time_est: string;
  date: string | null;
  available_seats: FlightDateAvailable['available_seats'];
  prices: FlightDateAvailable['prices'];
}

/** tau2's `_search_direct_flight`: available flights on `date`, optionally filtered (flights in database order). */
function searchDirect(
  db: AirlineDb,
  date: string,
  origin: string | null,
  destination: string | null,
  leaveAfter: string | null,
): DirectFlight[] {
  const out: DirectFlight[] = [];
  for (const f of db.flights.values()) {
    if (origin !== null && f.origin !== origin) continue;
    if (destination !== null && f.destination !== destination) continue;
    if (!Object.prototype.hasOwnProperty.call(f.dates, date)) continue;
    const d = f.dates[date];
    if (d.status !== 'available') continue;
    if (leaveAfter !== null && f.scheduled_departure_time_est < leaveAfter) continue;
    out.push({
      flight_number: f.flight_number,
      origin: f.origin,
      destination: f.destination,
      status: 'available',
      scheduled_departure_time_est: f.scheduled_departure_time_est,
      scheduled_arrival_time_est: f.scheduled_arrival_time_est,
      date: null,
      available_seats: d.available_seats,
      prices: d.prices,
    });
  }
  return out;
}

/** Takes `seats` off `cabin` of every (flight, date) booked, once per occurrence, as tau2 does. */
function takeSeats(
  db: AirlineDb,
  booked: readonly { flight_number: string; date: string }[],
  cabin: CabinClass,
  seats: number,
): void {
  for (const b of booked) {
    const flight = db.flights.get(b.flight_number) as Flight;
    const d = flight.dates[b.date] as FlightDateAvailable;
    const updated: FlightDateAvailable = {
      ...d,
      available_seats: { ...d.available_seats, [cabin]: perCabin(d.available_seats, cabin) - seats },
    };
    db.putFlight({ ...flight, dates: { ...flight.dates, [b.date]: updated } });
  }
}

/** The airline tools (tau2's order). */
export function airlineTools(): Tool<AirlineDb>[] {
  return [
    defineTool({
      name: 'book_reservation',
      kind: 'write',
      description: 'Book a reservation.',
      params: {
        user_id: USER_ID.describe("The id of the user who books, such as 'sara_doe_496'."),
        origin: AIRPORT('origin', 'SFO'),
        destination: AIRPORT('destination', 'JFK'),
        flight_type: z.enum(FLIGHT_TYPES as ['round_trip', 'one_way']).describe("'one_way' or 'round_trip'."),
        cabin: CABIN.describe("The cabin class: 'basic_economy', 'economy' or 'business'."),
        flights: z.array(FLIGHT_INFO).describe('Each flight of the trip: flight number and date.'),
        passengers: z.array(PASSENGER).describe('Each passenger: first name, last name, date of birth.'),
        payment_methods: z
          .array(PAYMENT)
          .describe('Each payment: payment method id and amount; the amounts must add up to the total price.'),
        total_baggages: INT.describe('The total number of bags.'),
        nonfree_baggages: INT.describe('The number of bags that are paid for.'),
        insurance: z.enum(['yes', 'no']).describe("Whether travel insurance is bought: 'yes' or 'no'."),
      },
      run: (db: AirlineDb, a) => {
        let user = getUser(db, a.user_id);
        const reservationId = NEW_RESERVATION_IDS.find((id) => !db.reservations.has(id));
        if (reservationId === undefined) throw new ToolError('Too many reservations');
        const n = a.passengers.length;
        const flights: ReservationFlight[] = [];
        let total = 0;
        for (const fi of a.flights) {
          const { flight, instance } = bookable(db, fi.flight_number, fi.date, a.cabin, n);
          const price = perCabin(instance.prices, a.cabin);
          flights.push({
            flight_number: fi.flight_number,
            origin: flight.origin,
            destination: flight.destination,
            date: fi.date,
            price,
          });
          total += price * n;
        }
        if (a.insurance === 'yes') total += 30 * n;
        total += 50 * a.nonfree_baggages;
        for (const p of a.payment_methods) {
          if (!Object.prototype.hasOwnProperty.call(user.payment_methods, p.payment_id))
            throw new ToolError(`Payment method ${p.payment_id} not found`);
          const pm = user.payment_methods[p.payment_id];
          if (pm.source !== 'credit_card' && pm.amount < p.amount)
            throw new ToolError(`Not enough balance in payment method ${p.payment_id}`);
        }
        const paid = a.payment_methods.reduce((s, p) => s + p.amount, 0);
        if (paid !== total)
          throw new ToolError(`Payment amount does not add up, total price is ${total}, but paid ${paid}`);
        for (const p of a.payment_methods) {
          const pm = user.payment_methods[p.payment_id];
          if (pm === undefined) {
            // a certificate listed twice: tau2 pops it, then fails on the second lookup (KeyError)
            // with the changes so far applied and no reservation made
            db.putUser(user);
            throw new ToolError(`'${p.payment_id}'`);
          }
          if (pm.source === 'gift_card') user = withPaymentMethod(user, { ...pm, amount: pm.amount - p.amount });
          else if (pm.source === 'certificate') {
            const { [p.payment_id]: _used, ...rest } = user.payment_methods;
            user = { ...user, payment_methods: rest };
          }
        }
        const reservation: Reservation = {
          reservation_id: reservationId,
          user_id: a.user_id,
          origin: a.origin,
          destination: a.destination,
          flight_type: a.flight_type,
          cabin: a.cabin,
          flights,
          passengers: a.passengers.map((p) => toPassenger(p)),
          payment_history: a.payment_methods.map((p) => ({ payment_id: p.payment_id, amount: p.amount })),
          created_at: AIRLINE_NOW,
          total_baggages: a.total_baggages,
          nonfree_baggages: a.nonfree_baggages,
          insurance: a.insurance,
          status: null,
        };
        takeSeats(db, a.flights, a.cabin, n);
        db.putReservation(reservation);
        db.putUser({ ...user, reservations: [...user.reservations, reservationId] });
        return intJSON(reservation);
      },
    }),
    defineTool({
      name: 'calculate',
      kind: 'generic',
      description: 'Calculate the result of a mathematical expression. Returns the result rounded to 2 decimals.',
      params: {
        expression: z
          .string()
          .describe("The expression, such as '2 + 2': numbers, the operators + - * /, parentheses and spaces."),
      },
      run: (_db: AirlineDb, a) => calculate(a.expression),
    }),
    defineTool({
      name: 'cancel_reservation',
      kind: 'write',
      description: 'Cancel the whole reservation. Returns the updated reservation.',
      params: { reservation_id: RESERVATION_ID },
      run: (db: AirlineDb, a) => {
        const r = getReservation(db, a.reservation_id);
        const refunds = r.payment_history.map((p) => ({
          payment_id: p.payment_id,
          amount: p.amount === 0 ? 0 : -p.amount,
        }));
        const updated: Reservation = { ...r, payment_history: [...r.payment_history, ...refunds], status: 'cancelled' };
        db.putReservation(updated);
        return intJSON(updated);
      },
    }),
    defineTool({
      name: 'get_reservation_details',
      kind: 'read',
      description: 'Get the details of a reservation.',
      params: { reservation_id: RESERVATION_ID.describe("The reservation id, such as '8JX2WO'.") },
      run: (db: AirlineDb, a) => intJSON(getReservation(db, a.reservation_id)),
    }),
    defineTool({
      name: 'get_user_details',
      kind: 'read',
      description: 'Get the details of a user, including their reservations.',
      params: { user_id: USER_ID },
      run: (db: AirlineDb, a) => userJSON(getUser(db, a.user_id)),
    }),
    defineTool({
      name: 'list_all_airports',
      kind: 'read',
      description: 'List every airport served: IATA code and city.',
      params: {},
      run: () => intJSON(AIRLINE_AIRPORTS),
    }),
    defineTool({
      name: 'search_direct_flight',
      kind: 'read',
      description: 'Search direct flights between two cities on a date.',
      params: { origin: AIRPORT('origin', 'JFK'), destination: AIRPORT('destination', 'LAX'), date: DATE },
      run: (db: AirlineDb, a) => intJSON(searchDirect(db, a.date, a.origin, a.destination, null)),
    }),
    defineTool({
      name: 'search_onestop_flight',
      kind: 'read',
      description: 'Search one-stop flights between two cities on a date. Returns pairs of flights.',
      params: { origin: AIRPORT('origin', 'JFK'), destination: AIRPORT('destination', 'LAX'), date: DATE },
      run: (db: AirlineDb, a) => {
        const pairs: [DirectFlight, DirectFlight][] = [];
        for (const first of searchDirect(db, a.date, a.origin, null, null)) {
          first.date = a.date;
          const date2 = first.scheduled_arrival_time_est.includes('+1')
            ? `2024-05-${pyInt(a.date.slice(-2)) + 1}`
            : a.date;
          for (const second of searchDirect(
            db,
            date2,
            first.destination,
            a.destination,
            first.scheduled_arrival_time_est,
          )) {
            second.date = date2;
            pairs.push([first, second]);
          }
        }
        return intJSON(pairs);
      },
    }),
    defineTool({
      name: 'send_certificate',
      kind: 'write',
      description: 'Send a certificate of some amount to a user. Be careful!',
      params: { user_id: USER_ID, amount: z.number().describe('The amount of the certificate in dollars.') },
      run: (db: AirlineDb, a) => {
        const user = getUser(db, a.user_id);
        const id = NEW_CERTIFICATE_IDS.find((c) => !Object.prototype.hasOwnProperty.call(user.payment_methods, c));
        if (id === undefined) throw new ToolError('Too many certificates');
        db.putUser(withPaymentMethod(user, { source: 'certificate', id, amount: a.amount }));
        return `Certificate ${id} added to user ${a.user_id} with amount ${pyNumberStr(a.amount, 'int')}.`;
      },
    }),
    defineTool({
      name: 'transfer_to_human_agents',
      kind: 'generic',
      description:
        "Transfer the user to a human agent with a summary of the user's issue. Only transfer when the user explicitly asks for a human agent, or when the issue cannot be solved with the policy and the available tools.",
      params: { summary: z.string().describe("A summary of the user's issue.") },
      run: () => 'Transfer successful',
    }),
    defineTool({
      name: 'update_reservation_baggages',
      kind: 'write',
      description: 'Update the bags of a reservation. Returns the updated reservation.',
      params: {
        reservation_id: RESERVATION_ID,
        total_baggages: INT.describe('The new total number of bags.'),
        nonfree_baggages: INT.describe('The new number of paid bags.'),
        payment_id: PAYMENT_ID,
      },
      run: (db: AirlineDb, a) => {
        const r = getReservation(db, a.reservation_id);
        const user = getUser(db, r.user_id);
        const payment = payForUpdate(db, user, a.payment_id, 50 * Math.max(0, a.nonfree_baggages - r.nonfree_baggages));
        const updated: Reservation = {
          ...r,
          payment_history: payment ? [...r.payment_history, payment] : r.payment_history,
          total_baggages: a.total_baggages,
          nonfree_baggages: a.nonfree_baggages,
        };
        db.putReservation(updated);
        return intJSON(updated);
      },
    }),
    defineTool({
      name: 'update_reservation_flights',
      kind: 'write',
      description: 'Update the flights (and cabin) of a reservation. Returns the updated reservation.',
      params: {
        reservation_id: RESERVATION_ID,
        cabin: CABIN.describe('The cabin class of the reservation.'),
        flights: z
          .array(FLIGHT_INFO)
          .describe(
            'Every flight of the ENTIRE new reservation: flight number and date. A flight segment that does not change must still be listed.',
          ),
        payment_id: PAYMENT_ID,
      },
      run: (db: AirlineDb, a) => {
        const r = getReservation(db, a.reservation_id);
        const user = getUser(db, r.user_id);
        const n = r.passengers.length;
        const flights: ReservationFlight[] = [];
        let total = 0;
        for (const fi of a.flights) {
          const kept =
            a.cabin === r.cabin
              ? r.flights.find((f) => f.flight_number === fi.flight_number && f.date === fi.date)
              : undefined;
          if (kept) {
            total += kept.price * n;
            flights.push(kept);
            continue;
          }
          const { flight, instance } = bookable(db, fi.flight_number, fi.date, a.cabin, n);
          const price = perCabin(instance.prices, a.cabin);
          flights.push({
            flight_number: fi.flight_number,
            origin: flight.origin,
            destination: flight.destination,
            date: fi.date,
            price,
          });
          total += price * n;
        }
        total -= r.flights.reduce((s, f) => s + f.price, 0) * n;
        const payment = payForUpdate(db, user, a.payment_id, total);
        const updated: Reservation = {
          ...r,
          flights,
          cabin: a.cabin,
          payment_history: payment ? [...r.payment_history, payment] : r.payment_history,
        };
        db.putReservation(updated);
        return intJSON(updated);
      },
    }),
    defineTool({
      name: 'update_reservation_passengers',
      kind: 'write',
      description:
        'Update the passengers of a reservation (the number of passengers cannot change). Returns the updated reservation.',
      params: {
        reservation_id: RESERVATION_ID,
        passengers: z.array(PASSENGER).describe('Each passenger: first name, last name, date of birth.'),
      },
      run: (db: AirlineDb, a) => {
        const r = getReservation(db, a.reservation_id);
        if (a.passengers.length !== r.passengers.length) throw new ToolError('Number of passengers does not match');
        const updated: Reservation = { ...r, passengers: a.passengers.map((p) => toPassenger(p)) };
        db.putReservation(updated);
        return intJSON(updated);
      },
    }),
    defineTool({
      name: 'get_flight_status',
      kind: 'read',
      description: 'Get the status of a flight on a date.',
      params: { flight_number: z.string().describe("The flight number, such as 'HAT001'."), date: DATE },
      run: (db: AirlineDb, a) => getInstance(getFlight(db, a.flight_number), a.date).status,
    }),
  ];
}

/** The airline agent toolkit. */
export function airlineToolkit(): Toolkit<AirlineDb> {
  return new Toolkit(airlineTools());
}
