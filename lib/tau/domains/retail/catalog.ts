/**
 * The embedded product catalog and name/address lists used to generate retail worlds
 * (written for sinkflex; generic product types and options, no tau2 data).
 * @module
 */

/** A product type: name, option dimensions and a price range. */
export interface CatalogEntry {
  /** Product name. */
  name: string;
  /** Option name → possible values. */
  options: Record<string, string[]>;
  /** Price range [min, max]. */
  price: [number, number];
}

const C = (name: string, price: [number, number], options: Record<string, string[]>): CatalogEntry => ({
  name,
  options,
  price,
});
const COLORS = ['black', 'white', 'red', 'blue', 'green', 'silver', 'gray'];

/** 50 product types. */
export const CATALOG: readonly CatalogEntry[] = [
  C('T-Shirt', [18, 60], { color: COLORS, size: ['S', 'M', 'L', 'XL'], material: ['cotton', 'polyester'] }),
  C('Running Shoes', [60, 220], {
    size: ['7', '8', '9', '10', '11'],
    color: ['black', 'white', 'red'],
    material: ['mesh', 'leather'],
  }),
  C('Water Bottle', [12, 60], {
    capacity: ['500ml', '750ml', '1000ml'],
    material: ['glass', 'plastic', 'stainless steel'],
    color: ['red', 'blue', 'green'],
  }),
  C('Backpack', [30, 250], {
    color: ['black', 'navy', 'green', 'grey'],
    size: ['small', 'medium', 'large'],
    material: ['nylon', 'polyester', 'leather'],
  }),
  C('Desk Lamp', [20, 160], {
    color: ['black', 'white', 'silver'],
    brightness: ['low', 'medium', 'high'],
    'power source': ['USB', 'AC adapter', 'battery'],
  }),
  C('Office Chair', [120, 560], {
    material: ['mesh', 'fabric', 'leather'],
    color: ['black', 'gray', 'blue'],
    armrest: ['fixed', 'adjustable'],
  }),
  C('Electric Kettle', [25, 180], {
    capacity: ['1L', '1.5L', '2L'],
    material: ['plastic', 'stainless steel', 'glass'],
    color: ['white', 'black', 'silver'],
  }),
  C('Wireless Earbuds', [40, 260], {
    color: ['black', 'white', 'blue'],
    'battery life': ['4 hours', '6 hours', '8 hours'],
    'water resistance': ['none', 'IPX4', 'IPX7'],
  }),
  C('Headphones', [50, 350], {
    type: ['on-ear', 'over-ear', 'in-ear'],
    connectivity: ['wired', 'wireless'],
    color: ['black', 'white', 'red'],
  }),
  C('Smart Watch', [90, 420], {
    color: ['black', 'silver', 'gold'],
    'band material': ['silicone', 'leather', 'metal'],
    display: ['LCD', 'AMOLED'],
  }),
  C('Mechanical Keyboard', [60, 280], {
    'switch type': ['linear', 'tactile', 'clicky'],
    backlight: ['none', 'white', 'RGB'],
    size: ['60%', '80%', 'full size'],
  }),
  C('Gaming Mouse', [20, 150], {
    color: ['black', 'white', 'RGB'],
    sensor: ['optical', 'laser'],
    connectivity: ['wired', 'wireless'],
  }),
  C('Laptop', [600, 2800], {
    'screen size': ['13-inch', '15-inch', '17-inch'],
    processor: ['i5', 'i7', 'i9'],
    ram: ['8GB', '16GB', '32GB'],
    color: ['silver', 'black', 'space grey'],
  }),
  C('Tablet', [180, 1100], {
    'screen size': ['8-inch', '10-inch', '12-inch'],
    storage: ['64GB', '128GB', '256GB'],
    color: ['black', 'silver', 'gold'],
  }),
  C('Smartphone', [300, 1400], {
    color: ['black', 'white', 'blue', 'gold'],
    storage: ['64GB', '128GB', '256GB'],
    'screen size': ['5.8-inch', '6.1-inch', '6.5-inch'],
  }),
  C('Digital Camera', [250, 3000], {
    resolution: ['20MP', '24MP', '30MP'],
    zoom: ['3x', '5x', '10x'],
    'storage type': ['SD card', 'CF card'],
  }),
  C('Action Camera', [150, 520], {
    resolution: ['1080p', '4K', '5K'],
    waterproof: ['yes', 'no'],
    color: ['black', 'silver'],
  }),
  C('Bluetooth Speaker', [30, 300], {
    color: ['black', 'blue', 'red', 'green'],
    'battery life': ['10 hours', '20 hours'],
    'water resistance': ['yes', 'no'],
  }),
  C('Coffee Maker', [40, 320], {
    color: ['black', 'stainless steel', 'white'],
    capacity: ['1 cup', '4 cups', '8 cups', '12 cups'],
    type: ['drip', 'espresso', 'french press'],
  }),
  C('Espresso Machine', [120, 3000], {
    pressure: ['9 bar', '15 bar', '19 bar'],
    capacity: ['1L', '1.5L', '2L'],
    type: ['manual', 'automatic', 'capsule'],
  }),
  C('Blender', [30, 350], {
    capacity: ['1L', '1.5L', '2L'],
    'motor power': ['500W', '800W', '1000W'],
    material: ['plastic', 'glass'],
  }),
  C('Air Purifier', [80, 600], {
    'room size': ['small', 'medium', 'large'],
    'filter type': ['HEPA', 'carbon', 'ionic'],
    features: ['quiet operation', 'night mode', 'smart sensors'],
  }),
  C('Vacuum Cleaner', [80, 700], {
    type: ['upright', 'canister', 'robotic'],
    'bagged/bagless': ['bagged', 'bagless'],
    features: ['pet hair removal', 'HEPA filter', 'cordless'],
  }),
  C('Hiking Boots', [80, 320], {
    size: ['7', '8', '9', '10', '11', '12'],
    material: ['leather', 'synthetic'],
    waterproof: ['yes', 'no'],
  }),
  C('Jigsaw Puzzle', [12, 90], {
    pieces: ['500', '1000', '1500', '2000'],
    theme: ['animals', 'art', 'landscape', 'fantasy'],
    'difficulty level': ['beginner', 'intermediate', 'expert'],
  }),
  C('Yoga Mat', [15, 120], {
    thickness: ['4mm', '5mm', '6mm'],
    material: ['PVC', 'TPE', 'natural rubber'],
    color: ['blue', 'purple', 'green', 'pink'],
  }),
  C('Sunglasses', [40, 320], {
    'frame color': ['black', 'brown', 'silver', 'gold'],
    'lens color': ['green', 'brown', 'blue', 'black'],
    polarized: ['yes', 'no'],
  }),
  C('Wristwatch', [60, 3000], { strap: ['leather', 'metal', 'silicone'], 'dial color': ['black', 'white', 'blue'] }),
  C('Tea Kettle', [25, 160], {
    material: ['glass', 'stainless steel', 'ceramic'],
    capacity: ['1 liter', '1.5 liters', '2 liters'],
    'stovetop compatibility': ['gas', 'electric', 'induction'],
  }),
  C('Skateboard', [50, 350], {
    'deck material': ['maple', 'bamboo', 'plastic'],
    length: ['28 inch', '31 inch', '34 inch'],
    design: ['plain', 'graphic', 'custom'],
  }),
  C('Bicycle', [300, 2200], {
    'frame size': ['small', 'medium', 'large'],
    color: ['black', 'red', 'blue', 'green'],
    type: ['road', 'mountain', 'hybrid'],
  }),
  C('Garden Hose', [20, 140], {
    length: ['25ft', '50ft', '100ft'],
    material: ['rubber', 'vinyl', 'latex'],
    color: ['green', 'black', 'blue'],
  }),
  C('Grill', [120, 1200], {
    type: ['charcoal', 'gas', 'electric'],
    size: ['portable', 'medium', 'large'],
    features: ['none', 'side burner', 'rotisserie'],
  }),
  C('Cycling Helmet', [30, 250], {
    size: ['S', 'M', 'L'],
    color: ['black', 'white', 'red', 'blue'],
    ventilation: ['low', 'medium', 'high'],
  }),
  C('Bookshelf', [60, 600], {
    material: ['wood', 'metal', 'glass'],
    color: ['white', 'black', 'brown'],
    height: ['3 ft', '4 ft', '5 ft', '6 ft'],
  }),
  C('Desk', [100, 900], {
    size: ['small', 'medium', 'large'],
    material: ['wood', 'glass', 'metal'],
    color: ['white', 'black', 'brown'],
  }),
  C('Sofa', [400, 3000], {
    color: ['gray', 'blue', 'beige', 'green'],
    material: ['fabric', 'leather', 'velvet'],
    size: ['2-seater', '3-seater', 'sectional'],
  }),
  C('Bed Sheets', [30, 250], {
    size: ['twin', 'queen', 'king'],
    material: ['cotton', 'linen', 'bamboo'],
    color: ['white', 'gray', 'blue'],
  }),
  C('Pillow', [15, 120], {
    firmness: ['soft', 'medium', 'firm'],
    material: ['memory foam', 'down', 'polyester'],
    size: ['standard', 'queen', 'king'],
  }),
  C('Indoor Security Camera', [40, 350], {
    resolution: ['1080p', '2K', '4K'],
    'field of view': ['110 degrees', '130 degrees', '160 degrees'],
    connectivity: ['Wi-Fi', 'Ethernet'],
  }),
  C('Smart Thermostat', [90, 320], {
    compatibility: ['Apple HomeKit', 'Google Assistant', 'Amazon Alexa'],
    color: ['black', 'white', 'stainless steel'],
  }),
  C('E-Reader', [80, 360], {
    'screen size': ['6-inch', '7-inch', '8-inch'],
    connectivity: ['Wi-Fi', 'Wi-Fi + Cellular'],
    storage: ['8GB', '32GB'],
  }),
  C('Portable Charger', [20, 150], {
    capacity: ['5000mAh', '10000mAh', '20000mAh'],
    output: ['USB-A', 'USB-C', 'wireless'],
    color: ['black', 'white', 'blue'],
  }),
  C('Makeup Kit', [30, 300], {
    'skin tone': ['light', 'medium', 'dark'],
    'kit size': ['basic', 'professional'],
    brand: ['Brand A', 'Brand B', 'Brand C'],
  }),
  C('Perfume', [40, 400], {
    'scent family': ['fresh', 'woody', 'oriental'],
    size: ['30ml', '50ml', '100ml'],
    gender: ['men', 'women', 'unisex'],
  }),
  C('Luggage Set', [90, 700], {
    'piece count': ['2-piece', '3-piece', '4-piece'],
    color: ['black', 'red', 'blue', 'silver'],
    material: ['softshell', 'hardshell'],
  }),
  C('Fleece Jacket', [40, 220], {
    size: ['S', 'M', 'L', 'XL'],
    color: ['black', 'navy', 'red'],
    zipper: ['full', 'half'],
  }),
  C('Notebook', [5, 40], {
    size: ['A5', 'A4'],
    cover: ['soft cover', 'hard cover'],
    'page type': ['lined', 'grid', 'blank'],
  }),
  C('Dumbbell Set', [40, 700], {
    'weight range': ['5-25 lbs', '30-50 lbs', '55-75 lbs'],
    material: ['iron', 'rubber', 'urethane'],
    'set type': ['fixed', 'adjustable'],
  }),
  C('Electric Toothbrush', [25, 260], {
    color: ['white', 'black', 'blue'],
    speed: ['low', 'high'],
    'battery type': ['AA batteries', 'rechargeable'],
  }),
];

/** First names. */
export const FIRST_NAMES = [
  'Ava',
  'Liam',
  'Noah',
  'Emma',
  'Mia',
  'Ethan',
  'Sofia',
  'Lucas',
  'Amelia',
  'Yusuf',
  'Aarav',
  'Chen',
  'Fatima',
  'Mei',
  'Omar',
  'Isabella',
  'James',
  'Olivia',
  'Harper',
  'Daiki',
  'Raj',
  'Lei',
  'Anya',
  'Mateo',
  'Evelyn',
  'Juan',
  'Yara',
  'Ivan',
  'Lina',
  'Mohamed',
  'Sara',
  'Emma',
  'Aiko',
  'Nadia',
  'Leo',
  'Zoe',
  'Hana',
  'Kenji',
  'Priya',
  'Diego',
];
/** Last names. */
export const LAST_NAMES = [
  'Smith',
  'Brown',
  'Garcia',
  'Rossi',
  'Lee',
  'Kim',
  'Silva',
  'Nguyen',
  'Khan',
  'Patel',
  'Johnson',
  'Ito',
  'Moore',
  'Santos',
  'Muller',
  'Lopez',
  'Anderson',
  'Wilson',
  'Sato',
  'Hernandez',
  'Thomas',
  'Martin',
  'Ahmed',
  'Kovacs',
  'Novak',
  'Jackson',
  'Davis',
  'Li',
  'Gonzalez',
  'Taylor',
];
/** Street names. */
export const STREETS = [
  'Main Street',
  'Oak Street',
  'Maple Avenue',
  'Cedar Street',
  'Elm Street',
  'Pine Lane',
  'River Road',
  'Sunset Drive',
  'Lakeview Drive',
  'Hillcrest Drive',
  'Park Avenue',
  'Broadway',
  'Highland Avenue',
  'Willow Lane',
  'Chestnut Street',
];
/** City, state and zip prefix. */
export const CITIES: readonly [string, string, string][] = [
  ['New York', 'NY', '100'],
  ['Austin', 'TX', '787'],
  ['San Antonio', 'TX', '782'],
  ['Denver', 'CO', '802'],
  ['Seattle', 'WA', '981'],
  ['Chicago', 'IL', '606'],
  ['Boston', 'MA', '021'],
  ['Phoenix', 'AZ', '850'],
  ['San Jose', 'CA', '951'],
  ['Los Angeles', 'CA', '900'],
  ['Philadelphia', 'PA', '191'],
  ['Charlotte', 'NC', '282'],
  ['Columbus', 'OH', '432'],
  ['Fort Worth', 'TX', '761'],
  ['San Diego', 'CA', '921'],
];
