/**
 * HTML escaping for the report (text and double- or single-quoted attribute values).
 * @module
 */

/** `s` with `&`, `<`, `>`, `"` and `'` escaped. */
export function escapeHtml(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}
