/**
 * The pure rules of a research run (domain/agents/agent-run.ts): how the model's answer reads as a
 * decision, what the system prompt says, how a step is clipped, which values a finish stores, why
 * a tool is not offered, and what a profile read's browser step says as the step's observation.
 */
import { describe, expect, it } from 'vitest';
import {
  clip,
  clippedStep,
  detailOf,
  finishValues,
  notOfferedReason,
  parseDecision,
  profileFailure,
  profileObservation,
  profileReadAnswer,
  profileReadUrl,
  systemPrompt,
  type AgentDecision,
  type ProfileReadStep,
} from '../../domain/agents/agent-run.js';
import { observationMax } from '../../domain/agents/saved-agents.js';

describe('parseDecision: the model’s answer as a step', () => {
  it('reads an action with its thought and arguments, a code fence around the JSON set aside', () => {
    const content = '```json\n{"thought": "look", "action": "search", "args": {"query": "acme"}}\n```';
    expect(parseDecision(content, false)).toEqual({
      action: 'search',
      thought: 'look',
      args: { query: 'acme' },
      values: null,
      problem: null,
    });
  });

  it('reads finish with its values', () => {
    expect(parseDecision('{"action": "finish", "values": {"ceo": "Ada"}}', false)).toMatchObject({
      action: 'finish',
      values: { ceo: 'Ada' },
      problem: null,
    });
  });

  it('names the problem of an answer that is no usable step', () => {
    expect(parseDecision('not json', false).problem).toBe("The model's answer was not JSON: not json");
    expect(parseDecision('{"action": "dance"}', false).problem).toBe('The model named no known action (dance).');
    expect(parseDecision('{"action": "finish"}', false).problem).toBe('finish came without a "values" object.');
    expect(parseDecision('{"action": "finish", "values": [1]}', false).problem).toBe(
      'finish came without a "values" object.',
    );
  });

  it('takes arguments that are not an object as none', () => {
    expect(parseDecision('{"action": "search", "args": ["acme"]}', false).args).toEqual({});
  });

  it('reads a plain run’s answer as finish, whatever action it names', () => {
    expect(parseDecision('{"action": "search", "values": {"a": 1}}', true)).toEqual({
      action: 'finish',
      thought: null,
      args: {},
      values: { a: 1 },
      problem: null,
    });
    expect(parseDecision('{"thought": "hm"}', true)).toMatchObject({
      action: 'finish',
      thought: 'hm',
      problem: 'The answer had no "values" object.',
    });
  });
});

describe('systemPrompt', () => {
  const run = {
    agent: {
      output_fields: [
        { key: 'ceo', name: 'CEO', type: 'text' as const, description: 'the chief executive' },
        { key: 'size', name: 'Size', type: 'number' as const, description: null },
      ],
    },
    mcp_tools: [{ name: 'lookup', description: 'looks things up' }],
    start_url: 'https://acme.test/',
  };

  it('asks a plain run for the fields alone', () => {
    expect(systemPrompt(run, ['search …'], true, 8)).toBe(
      'Answer the request with one JSON object {"values": {...}} holding these fields (null when unknown):\n' +
        '- ceo (text): CEO — the chief executive\n- size (number): Size',
    );
  });

  it('lists the offered actions’ lines, the MCP tools, the step bound and the starting URL', () => {
    const prompt = systemPrompt(run, ['search {"query": string}: search the web', 'finish …'], false, 4);
    expect(prompt).toContain(
      'Actions:\n- search {"query": string}: search the web\n- finish …\nMCP tools:\n- lookup: looks things up',
    );
    expect(prompt).toContain('You have at most 4 research steps; then you must finish.');
    expect(prompt).toContain('Start from https://acme.test/.');
    expect(systemPrompt({ ...run, mcp_tools: [], start_url: null }, [], false, 4)).not.toMatch(/MCP tools|Start from/);
  });
});

describe('a step as stored', () => {
  const decision = (args: Record<string, unknown>): AgentDecision => ({
    action: 'mcp_tool',
    thought: null,
    args,
    values: null,
    problem: null,
  });

  it('details the action with its arguments, objects as JSON', () => {
    expect(detailOf(decision({ tool: 'lookup', arguments: { q: 1 } }))).toBe('mcp_tool tool=lookup arguments={"q":1}');
    expect(detailOf(decision({}))).toBe('mcp_tool');
  });

  it('clips its texts and rounds its duration up from below zero', () => {
    const long = 'x'.repeat(5000);
    const step = clippedStep({ n: 1, detail: long, duration_ms: -3.4, observation: long, thought: long });
    expect(step.n).toBe(1);
    expect(step.detail).toHaveLength(2000);
    expect(step.thought).toHaveLength(2000);
    expect(step.observation).toHaveLength(observationMax);
    expect(step.observation.endsWith('…')).toBe(true);
    expect(step.duration_ms).toBe(0);
    expect(clippedStep({ detail: 'd', duration_ms: 12.6, observation: 'o', thought: null })).toEqual({
      detail: 'd',
      duration_ms: 13,
      observation: 'o',
      thought: null,
    });
    expect(clip('short')).toBe('short');
  });
});

describe('notOfferedReason', () => {
  it('names the reach none first, then the setting that switches the tool off, else the reach', () => {
    expect(notOfferedReason('none', 'allow_search')).toBe('the agent’s reach is none');
    expect(notOfferedReason('web', 'allow_search')).toBe('allow_search is off');
    expect(notOfferedReason('web', 'allow_fetch')).toBe('allow_fetch is off');
    expect(notOfferedReason('mcp', undefined)).toBe('its reach is mcp');
  });
});

describe('finishValues', () => {
  it('keeps every output field (null when not given), objects as JSON text, and drops other keys', () => {
    expect(finishValues(['a', 'b', 'c'], { a: 'x', b: { n: 1 }, z: 'other' })).toEqual({
      values: { a: 'x', b: '{"n":1}', c: null },
      empty: false,
    });
  });

  it('is empty when no field holds anything', () => {
    expect(finishValues(['a', 'b'], { a: '  ', b: undefined }).empty).toBe(true);
    expect(finishValues(['a'], { a: 0 }).empty).toBe(false);
    expect(finishValues([], {}).empty).toBe(true);
  });
});

describe('profile reads', () => {
  it('visits only an http(s) address of at most 2048 characters', () => {
    expect(profileReadUrl('https://network.test/in/ada')).toBe('https://network.test/in/ada');
    expect(profileReadUrl('ftp://network.test/in/ada')).toBeNull();
    expect(profileReadUrl('ada')).toBeNull();
    expect(profileReadUrl(`https://network.test/${'a'.repeat(2048)}`)).toBeNull();
  });

  const step = (over: Partial<ProfileReadStep> = {}): ProfileReadStep => ({
    status: 'succeeded',
    params: { profile_url: 'https://network.test/in/ada' },
    outcome: { already_connected: false, vanity: 'ada', member_urn: null },
    error_code: null,
    error_message: null,
    reject_reason: null,
    ...over,
  });

  it('reads the relationship facts the browser reported', () => {
    expect(profileObservation(step())).toBe(
      "Profile https://network.test/in/ada read by the workspace's pnet account.\nvanity: ada\nalready_connected: false",
    );
    expect(profileObservation(step({ outcome: null }))).toContain('The browser reported no relationship facts.');
  });

  it('says how a read that did not succeed ended', () => {
    expect(profileFailure(step({ status: 'rejected', reject_reason: 'not now' }))).toBe(
      'A person rejected the profile read on the Tasks page (not now).',
    );
    expect(profileFailure(step({ status: 'failed', error_code: 'tab_lost', error_message: 'gone' }))).toBe(
      'The profile read failed (tab_lost: gone).',
    );
    expect(profileFailure(step({ status: 'skipped' }))).toBe('The browser skipped the profile read.');
  });

  it('ends the research step as its browser step stands', () => {
    expect(profileReadAnswer(undefined, false)).toEqual({
      outcome: 'failed',
      observation: 'The profile read’s browser step is gone.',
    });
    expect(profileReadAnswer(step(), false).outcome).toBe('completed');
    expect(profileReadAnswer(step({ status: 'cancelled' }), false)).toEqual({
      outcome: 'failed',
      observation: 'The profile read was cancelled.',
    });
    // Cancelled by the run's own timeout, or still open: it did not finish in time.
    expect(profileReadAnswer(step({ status: 'cancelled' }), true).observation).toBe(
      'The profile read did not finish within 10 minutes (its step is cancelled now).',
    );
    expect(profileReadAnswer(step({ status: 'claimed' }), true).observation).toBe(
      'The profile read did not finish within 10 minutes (its step is still claimed).',
    );
  });
});
