/** Small helpers shared by the simulator's command lines: flags, numbers, a seeded random. */

import { textOf } from '../domain/shared/text.js';

export function numberFlag(
  values: Record<string, unknown>,
  name: string,
  fallback: number,
  bounds: { min?: number; max?: number } = {},
): number {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (
    !Number.isFinite(value) ||
    (bounds.min !== undefined && value < bounds.min) ||
    (bounds.max !== undefined && value > bounds.max)
  ) {
    throw new UsageError(
      `--${name} must be a number${bounds.min !== undefined ? ` from ${bounds.min}` : ''}${bounds.max !== undefined ? ` to ${bounds.max}` : ''}, not "${textOf(raw)}".`,
    );
  }
  return value;
}

/** `MIN-MAX` in milliseconds, for example `200-1500`. */
export function rangeFlag(values: Record<string, unknown>, name: string, fallback: [number, number]): [number, number] {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const match = /^(\d+)-(\d+)$/.exec(textOf(raw));
  if (!match || Number(match[1]) > Number(match[2]))
    throw new UsageError(`--${name} must be MIN-MAX in milliseconds, for example 200-1500.`);
  return [Number(match[1]), Number(match[2])];
}

export class UsageError extends Error {
  override name = 'UsageError';
}

/** mulberry32: a run can be repeated with the same --seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
