import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TimestampSchema, lineSchema, queryInteger, textSchema } from '../../domain/shared/common.js';

const accepts = (value: string) => TimestampSchema.safeParse(value).success;

describe('request instants', () => {
  it('takes RFC 3339 instants with any fraction up to nanoseconds and an offset up to 15:59 either way', () => {
    expect(accepts('2026-11-28T22:30:47Z')).toBe(true);
    expect(accepts('2026-11-28T22:30:47.123456789+15:59')).toBe(true);
    expect(accepts('2026-11-28T22:30:47.1234567890Z')).toBe(false);
    expect(accepts('2026-11-28T22:30:47-15:59')).toBe(true);
    expect(accepts('2026-11-28T22:30:47-16:00')).toBe(false);
    expect(accepts('2026-11-28T22:30:47+23:00')).toBe(false);
    expect(accepts('2026-11-28 22:30:47Z')).toBe(false);
    expect(accepts('2026-11-28T22:30:47')).toBe(false);
  });

  it('takes years 1000 to 9999: below, the database and its driver would not give the instant back', () => {
    expect(accepts('1000-01-01T00:00:00Z')).toBe(true);
    expect(accepts('0999-12-31T23:59:59Z')).toBe(false);
    expect(accepts('0020-02-29T00:00:00Z')).toBe(false);
    expect(accepts('9999-12-31T23:59:59Z')).toBe(true);
    expect(accepts('10000-01-01T00:00:00Z')).toBe(false);
  });

  it('knows the calendar: leap days in leap years only, and the length of each month', () => {
    for (const year of [1004, 1600, 2000, 2024, 2400, 9996])
      expect(accepts(`${year}-02-29T00:00:00Z`), String(year)).toBe(true);
    for (const year of [1100, 1900, 2023, 2100, 9999])
      expect(accepts(`${year}-02-29T00:00:00Z`), String(year)).toBe(false);
    expect(accepts('2026-04-30T00:00:00Z')).toBe(true);
    expect(accepts('2026-04-31T00:00:00Z')).toBe(false);
    expect(accepts('2026-12-31T23:59:59Z')).toBe(true);
    expect(accepts('2026-13-01T00:00:00Z')).toBe(false);
  });

  it('agrees with the JavaScript clock on every instant it takes', () => {
    for (const value of ['1000-01-01T00:00:00+15:59', '2024-02-29T23:59:59.999-15:59', '9999-12-31T08:00:00+15:00']) {
      expect(accepts(value)).toBe(true);
      expect(Number.isNaN(new Date(value).getTime())).toBe(false);
    }
  });
});

describe('request strings', () => {
  it('refuses control characters in a line and only NUL in free text, at and past their bounds', () => {
    const line = lineSchema(1, 5);
    expect(line.safeParse('abcde').success).toBe(true);
    expect(line.safeParse('abcdef').success).toBe(false);
    expect(line.safeParse('').success).toBe(false);
    expect(line.safeParse('a\tb').success).toBe(false);
    const text = textSchema(0, 5);
    expect(text.safeParse('a\nb\tc').success).toBe(true);
    expect(text.safeParse('a\u0000b').success).toBe(false);
    expect(text.safeParse('abcdef').success).toBe(false);
  });
});

describe('integer query parameters', () => {
  const page = z.object({ offset: queryInteger(z.int().min(0).max(1_000_000).default(0)) });
  const read = (query: Record<string, string>) => page.safeParse(query);

  it('reads decimal digits as the number, at and past its bounds, and the default when absent', () => {
    expect(read({}).data).toEqual({ offset: 0 });
    expect(read({ offset: '0' }).data).toEqual({ offset: 0 });
    expect(read({ offset: '1000000' }).data).toEqual({ offset: 1_000_000 });
    expect(read({ offset: '1000001' }).success).toBe(false);
    expect(read({ offset: '-1' }).success).toBe(false);
  });

  it('refuses what is not an integer written out, where a plain coercion would read a number', () => {
    for (const offset of ['', ' ', ' 3', '1e3', '0x10', '2.5', 'Infinity'])
      expect(read({ offset }).success, JSON.stringify(offset)).toBe(false);
  });

  it('documents an integer with its bounds and default', () => {
    expect(z.toJSONSchema(page, { io: 'input' }).properties?.offset).toEqual({
      type: 'integer',
      minimum: 0,
      maximum: 1_000_000,
      default: 0,
    });
  });
});
