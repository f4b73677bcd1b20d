/**
 * Harmony's tool definitions: JSON-schema parameters written as the TypeScript-like types the
 * gpt-oss models were trained on, and the `# Tools` section of namespaces of such functions
 * (`namespace functions { type NAME = (_: {…}) => any; }`). Written from the harmony format's
 * specification and its expected renderings (see `harmony-format.ts`): descriptions become `//`
 * comments above a field, defaults trailing comments, optional fields get `?`, `oneOf` becomes a
 * union with one ` | ` line per variant.
 * @module
 */

/** A JSON schema (any JSON object). */
export type HarmonyJsonSchema = Readonly<Record<string, unknown>>;

/** A function tool of a namespace. */
export interface HarmonyTool {
  /** The function name. */
  name: string;
  /** Its description (one `//` comment line per line). */
  description: string;
  /** Its parameters (a JSON schema of an object), or null for a function without arguments. */
  parameters?: HarmonyJsonSchema | null;
}

/** A namespace of tools (`functions`, or built-in ones such as `browser`). */
export interface HarmonyToolNamespace {
  /** The namespace name. */
  name: string;
  /** Text under the `## name` heading (comment lines when the namespace has tools, plain text otherwise). */
  description?: string | null;
  /** The functions (none: the description alone, as for `python`). */
  tools: readonly HarmonyTool[];
}

function obj(v: unknown): HarmonyJsonSchema | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as HarmonyJsonSchema) : null;
}

function isEnum(s: HarmonyJsonSchema): boolean {
  return Array.isArray(s.enum) && s.enum.length > 0;
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** A default as a comment: strings in quotes (bare for enums), other values as JSON. */
function defaultText(schema: HarmonyJsonSchema, value: unknown): string {
  if (typeof value === 'string') return isEnum(schema) ? value : `"${value}"`;
  return JSON.stringify(value);
}

function withNull(schema: HarmonyJsonSchema, type: string): string {
  return schema.nullable === true && !type.includes('null') ? `${type} | null` : type;
}

/** One `oneOf` variant's trailing comments. */
function variantComments(variant: HarmonyJsonSchema, description: string | null): string {
  const parts: string[] = [];
  if (description !== null) parts.push(description);
  if (variant.default !== undefined) parts.push(`default: ${defaultText(variant, variant.default)}`);
  return parts.length > 0 ? ` // ${parts.join(' ')}` : '';
}

function objectType(schema: HarmonyJsonSchema, indent: string): string {
  let out = '';
  const desc = str(schema.description);
  if (desc !== null) out += `${indent}// ${desc}\n`;
  out += '{\n';
  const props = obj(schema.properties) ?? {};
  const required = new Set(
    Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === 'string') : [],
  );
  for (const [key, raw] of Object.entries(props)) {
    const val = obj(raw) ?? {};
    const opt = required.has(key) ? '' : '?';
    const title = str(val.title);
    if (title !== null) out += `${indent}// ${title}\n${indent}//\n`;
    const oneOf = Array.isArray(val.oneOf) ? val.oneOf : null;
    const pdesc = str(val.description);
    if (oneOf === null && pdesc !== null) out += `${indent}// ${pdesc}\n`;
    if (Array.isArray(val.examples) && val.examples.length > 0) {
      out += `${indent}// Examples:\n`;
      for (const ex of val.examples) if (typeof ex === 'string') out += `${indent}// - "${ex}"\n`;
    }
    if (oneOf !== null) {
      const first = obj(oneOf[0]);
      const above = pdesc !== null && str(first?.description) !== pdesc;
      if (above) out += `${indent}// ${pdesc}\n`;
      if (val.default !== undefined) out += `${indent}// default: ${defaultText(val, val.default)}\n`;
      out += `${indent}${key}${opt}:\n`;
      oneOf.forEach((v, i) => {
        const variant = obj(v) ?? {};
        const vdesc = str(variant.description);
        const shown = (i === 0 && above) || vdesc === pdesc ? null : vdesc;
        out += `${indent} | ${withNull(variant, schemaToTypeScript(variant, `${indent}   `))}${variantComments(variant, shown)}\n`;
      });
      out += `${indent},\n`;
      continue;
    }
    out += `${indent}${key}${opt}: ${withNull(val, schemaToTypeScript(val, `${indent}    `))},`;
    if (val.default !== undefined) out += ` // default: ${defaultText(val, val.default)}`;
    out += '\n';
  }
  return `${out}${indent}}`;
}

/** The TypeScript-like type of a JSON schema (harmony's rendering of tool parameters). */
export function schemaToTypeScript(schema: HarmonyJsonSchema, indent = ''): string {
  if (Array.isArray(schema.oneOf)) {
    return schema.oneOf
      .map((v) => {
        const variant = obj(v) ?? {};
        return `\n${indent} | ${withNull(variant, schemaToTypeScript(variant, `${indent}   `))}${variantComments(variant, str(variant.description))}`;
      })
      .join('');
  }
  if (Array.isArray(schema.type)) {
    const types = schema.type
      .filter((t): t is string => typeof t === 'string')
      .map((t) => (t === 'integer' ? 'number' : t));
    if (types.length > 0) return types.join(' | ');
  }
  switch (schema.type) {
    case 'object':
      return objectType(schema, indent);
    case 'string': {
      const values = Array.isArray(schema.enum) ? schema.enum.filter((v): v is string => typeof v === 'string') : [];
      return values.length > 0 ? values.map((v) => `"${v}"`).join(' | ') : 'string';
    }
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'array': {
      const items = obj(schema.items);
      return items ? `${schemaToTypeScript(items, indent)}[]` : 'Array<any>';
    }
    default:
      return 'any';
  }
}

/** The `# Tools` section of namespaces (sorted by name, as harmony orders them). */
export function harmonyToolsSection(namespaces: readonly HarmonyToolNamespace[]): string {
  const sections = ['# Tools'];
  for (const ns of [...namespaces].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const lines = [`## ${ns.name}\n`];
    const hasTools = ns.tools.length > 0;
    if (ns.description) for (const line of splitLines(ns.description)) lines.push(hasTools ? `// ${line}` : line);
    if (hasTools) {
      lines.push(`namespace ${ns.name} {\n`);
      for (const tool of ns.tools) {
        for (const line of splitLines(tool.description)) lines.push(`// ${line}`);
        lines.push(
          tool.parameters
            ? `type ${tool.name} = (_: ${schemaToTypeScript(tool.parameters)}) => any;\n`
            : `type ${tool.name} = () => any;\n`,
        );
      }
      lines.push(`} // namespace ${ns.name}`);
    }
    sections.push(lines.join('\n'));
  }
  return sections.join('\n\n');
}

/** Lines of a text as Rust's `str::lines` gives them (no trailing empty line; `\r\n` ends a line too). */
function splitLines(text: string): string[] {
  if (text.length === 0) return [];
  const lines = text.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  if (text.endsWith('\n')) lines.pop();
  return lines;
}
