/**
 * The verb registry of services/assistant/verbs.ts is total at run time: one entry for every value
 * of the verb enum (`AssistantVerb`) and nothing else, each with a label, and a send exactly where
 * the domain says a verb always asks. The type makes it total; this checks the object itself.
 */
import { describe, expect, it } from 'vitest';
import { alwaysAsks, verbLabels, verbs } from '../../domain/assistant/assistant.js';
import { isBuiltVerb, refusedVerbs } from '../../domain/assistant/verbs.js';
import { quoteVerb, verbRegistry, VerbRefused, type VerbDeps } from '../../services/assistant/verbs.js';

describe('the verb registry', () => {
  it('has one entry per verb of the enum, and no other', () => {
    expect(Object.keys(verbRegistry).sort()).toEqual([...verbs].sort());
  });

  it.each(verbs)('%s has a label (the one cards show) and quote and apply functions', (verb) => {
    const entry = verbRegistry[verb];
    expect(entry.label.trim()).not.toBe('');
    expect(entry.label).toBe(verbLabels[verb]);
    expect(typeof entry.quote).toBe('function');
    expect(typeof entry.apply).toBe('function');
  });

  it.each(verbs)('%s is a send exactly when the domain says it always asks', (verb) => {
    expect(verbRegistry[verb].sends).toBe(alwaysAsks.has(verb));
  });

  it.each(verbs)('%s is either built (has an input schema) or refused with a reason', (verb) => {
    expect(isBuiltVerb(verb) !== (refusedVerbs[verb] !== undefined)).toBe(true);
  });

  // Refusals answer before any I/O, so no dependency is touched.
  const noDeps = {} as VerbDeps;

  it('quotes a refused verb as the reason it is refused', async () => {
    await expect(quoteVerb(noDeps, 'w', 'push_to_destination', {})).rejects.toEqual(
      new VerbRefused(refusedVerbs.push_to_destination),
    );
  });

  it.each(['no_such_verb', 'constructor', 'toString'])('refuses a name that is no verb (%s)', async (name) => {
    await expect(quoteVerb(noDeps, 'w', name, {})).rejects.toThrow(`There is no workspace verb named ${name}.`);
  });

  it('refuses a bad input before reading the workspace', async () => {
    await expect(quoteVerb(noDeps, 'w', 'run_column', { table_id: 'x' })).rejects.toBeInstanceOf(VerbRefused);
  });
});
