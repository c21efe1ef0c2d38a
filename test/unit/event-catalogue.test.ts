/**
 * Every type of the notification catalogue is written by some change: a type nothing records
 * would let a person make a rule that never fires. Read from the source text (the type's name in
 * a store or service file, where events are recorded with the change); the integration tests show
 * each one firing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventTypes } from '../../domain/notifications/events.js';

const root = resolve(import.meta.dirname, '..', '..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [readFileSync(path, 'utf8')] : [];
  });
}

describe('the event catalogue', () => {
  it('has no type that no store or service records', () => {
    const text = ['store', 'services'].flatMap((dir) => sources(join(root, dir))).join('\n');
    expect(eventTypes.filter((type) => !text.includes(`'${type}'`))).toEqual([]);
  });
});
