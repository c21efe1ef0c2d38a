/**
 * A value of unknown type as text (parsed JSON, a cell, a flag): a string as it is; a number,
 * boolean or bigint as `String` writes it; null and undefined as ''; an object or array as its
 * JSON, never "[object Object]".
 */
export function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null || value === undefined) return '';
  // undefined for a function or a symbol.
  return JSON.stringify(value) ?? '';
}
