/**
 * A research run's pure rules (services/agents/agent-run.ts and its neighbours apply them): what
 * the model is told, how its answer reads as a step, how long a step's texts may be, which values
 * a finish stores, why a tool is not offered, and what a profile read's browser step says as the
 * step's observation.
 */
import { terminalStatuses } from '../pnet/settle.js';
import type { StepErrorCode, StoredStepStatus } from '../pnet/steps.js';
import {
  agentActions,
  observationMax,
  type AgentAction,
  type AgentDefinition,
  type AgentReach,
  type AgentRunStatus,
  type AgentStepOutcome,
} from './saved-agents.js';

export type AgentRunPlan =
  | { state: 'finished'; status: AgentRunStatus | 'gone' }
  | { state: 'refused'; reason: string }
  | { state: 'go'; maxSteps: number; plain: boolean };

/** What the model chose: an action with its arguments, or `finish` with the answer. */
export interface AgentDecision {
  action: AgentAction;
  thought: string | null;
  args: Record<string, unknown>;
  values: Record<string, unknown> | null;
  /** Set when the answer was not a usable step; it is recorded as a failed step. */
  problem: string | null;
}

/** Step `n` of a run, as the model decided it. */
export interface AgentStepInput {
  runId: string;
  n: number;
  decision: AgentDecision;
}

/** A tool's answer: the step's outcome and what the model reads back. */
export type ToolAnswer = { outcome: AgentStepOutcome; observation: string };
export const refused = (observation: string): ToolAnswer => ({ outcome: 'refused', observation });

/** How long a research run waits for a queued profile read before it records the step as failed. */
export const profileReadWaitMinutes = 10;
export const endedRun: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);

export const clip = (text: string, max = observationMax) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

/** A tool argument as text: trimmed, '' for anything not a string. */
export const argText = (v: unknown) => (typeof v === 'string' ? v.trim() : '');

/** What the system prompt reads of a run. */
export interface PromptRun {
  agent: Pick<AgentDefinition, 'output_fields'>;
  mcp_tools: { name: string; description: string }[];
  start_url: string | null;
}

/** `actionHelp`: one line per offered action (its arguments and what it does), in offer order. */
export function systemPrompt(run: PromptRun, actionHelp: string[], plain: boolean, maxSteps: number): string {
  const fields = run.agent.output_fields
    .map((f) => `- ${f.key} (${f.type}): ${f.name}${f.description ? ` — ${f.description}` : ''}`)
    .join('\n');
  if (plain) {
    return `Answer the request with one JSON object {"values": {...}} holding these fields (null when unknown):\n${fields}`;
  }
  const mcp =
    run.mcp_tools.length > 0
      ? `\nMCP tools:\n${run.mcp_tools.map((t) => `- ${t.name}: ${t.description}`).join('\n')}`
      : '';
  return [
    'You are a research agent. Work step by step; each answer is ONE JSON object:',
    '{"thought": "why this step", "action": "<action>", "args": {...}} or, when done, {"thought": "...", "action": "finish", "values": {...}}.',
    `Actions:\n${actionHelp.map((help) => `- ${help}`).join('\n')}${mcp}`,
    `The answer's fields:\n${fields}`,
    `You have at most ${maxSteps} research steps; then you must finish.`,
    run.start_url ? `Start from ${run.start_url}.` : '',
  ]
    .filter(Boolean)
    .join('\n\n');
}

/** The model's answer as a decision; one that is no usable step carries its `problem`. */
export function parseDecision(content: string, plain: boolean): AgentDecision {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content.replace(/^```(?:json)?\s*|\s*```$/g, ''));
  } catch {
    return {
      action: 'finish',
      thought: null,
      args: {},
      values: null,
      problem: `The model's answer was not JSON: ${clip(content, 300)}`,
    };
  }
  const o = (parsed ?? {}) as { thought?: unknown; action?: unknown; args?: unknown; values?: unknown };
  const thought = typeof o.thought === 'string' ? o.thought : null;
  const values =
    o.values !== null && typeof o.values === 'object' && !Array.isArray(o.values)
      ? (o.values as Record<string, unknown>)
      : null;
  if (plain)
    return values
      ? { action: 'finish', thought, args: {}, values, problem: null }
      : { action: 'finish', thought, args: {}, values: null, problem: 'The answer had no "values" object.' };
  if (typeof o.action !== 'string' || !(agentActions as readonly string[]).includes(o.action)) {
    return {
      action: 'finish',
      thought,
      args: {},
      values: null,
      problem: `The model named no known action (${clip(String(o.action), 100)}).`,
    };
  }
  const action = o.action as AgentAction;
  if (action === 'finish' && !values)
    return { action, thought, args: {}, values: null, problem: 'finish came without a "values" object.' };
  const args =
    o.args !== null && typeof o.args === 'object' && !Array.isArray(o.args) ? (o.args as Record<string, unknown>) : {};
  return { action, thought, args, values, problem: null };
}

/** A step's `detail`: the action and its arguments as the trace shows them. */
export const detailOf = (decision: AgentDecision) => {
  const shown = Object.entries(decision.args).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return clip(`${decision.action}${shown.length ? ` ${shown.join(' ')}` : ''}`, 2000);
};

/** What a step stores: its texts clipped to what agent_run_steps keeps, its duration whole and not negative. */
export function clippedStep<
  S extends { detail: string; duration_ms: number; observation: string; thought: string | null },
>(step: S): S {
  return {
    ...step,
    detail: clip(step.detail, 2000),
    duration_ms: Math.max(0, Math.round(step.duration_ms)),
    observation: clip(step.observation),
    thought: step.thought === null ? null : clip(step.thought, 2000),
  };
}

/**
 * Why an action the agent does not offer was refused: the setting that switches it off
 * (`allow_search`, `allow_fetch`: the tool registry's `setting`), else the reach.
 */
export function notOfferedReason(reach: AgentReach, setting: 'allow_search' | 'allow_fetch' | undefined): string {
  if (reach === 'none') return 'the agent’s reach is none';
  return setting ? `${setting} is off` : `its reach is ${reach}`;
}

/**
 * The answer a finish stores: every output field's value (null when not given), objects as JSON
 * text; `empty` when no field holds anything, which costs nothing.
 */
export function finishValues(
  keys: string[],
  given: Record<string, unknown>,
): { values: Record<string, unknown>; empty: boolean } {
  const values = Object.fromEntries(
    keys.map((k) => [k, Object.hasOwn(given, k) && given[k] !== undefined ? given[k] : null]),
  ) as Record<string, unknown>;
  for (const [k, v] of Object.entries(values)) if (v !== null && typeof v === 'object') values[k] = JSON.stringify(v);
  const empty = Object.values(values).every((v) => v === null || (typeof v === 'string' && v.trim() === ''));
  return { values, empty };
}

/** read_pnet_profile's `profile_url` as the address to visit: http(s), at most 2048 characters; null for anything else. */
export function profileReadUrl(given: string): string | null {
  try {
    const url = new URL(given);
    if (!['http:', 'https:'].includes(url.protocol) || given.length > 2048) return null;
    return url.href;
  } catch {
    return null;
  }
}

/** The relationship facts a profile_view with read_relationship reports, as the model reads them. */
const profileFacts = [
  'profile_resolved',
  'vanity',
  'member_urn',
  'already_connected',
  'invitation_pending',
  'can_send_message',
  'already_following',
  'open_profile',
] as const;

/** What a profile read reads of its browser step (store/pnet/steps.ts's StepRow). */
export interface ProfileReadStep {
  status: StoredStepStatus;
  params: Record<string, unknown>;
  outcome: Record<string, unknown> | null;
  error_code: StepErrorCode | null;
  error_message: string | null;
  reject_reason: string | null;
}

export function profileObservation(step: ProfileReadStep): string {
  const outcome = step.outcome ?? {};
  const facts = profileFacts
    .filter((k) => outcome[k] !== undefined && outcome[k] !== null)
    .map((k) => `${k}: ${String(outcome[k])}`);
  return [
    `Profile ${String(step.params.profile_url)} read by the workspace's pnet account.`,
    ...(facts.length ? facts : ['The browser reported no relationship facts.']),
  ].join('\n');
}

export function profileFailure(step: ProfileReadStep): string {
  const why = [step.error_code, step.error_message ?? step.reject_reason].filter(Boolean).join(': ');
  const said = why ? ` (${why})` : '';
  if (step.status === 'rejected') return `A person rejected the profile read on the Tasks page${said}.`;
  if (step.status === 'cancelled') return `The profile read was cancelled${said}.`;
  if (step.status === 'skipped') return `The browser skipped the profile read${said}.`;
  return `The profile read failed${said}.`;
}

/**
 * The research step a profile read ends as, from its browser step as it stands (undefined: gone).
 * A step the run's own timeout cancelled, or one still open, did not finish in time.
 */
export function profileReadAnswer(step: ProfileReadStep | undefined, timedOut: boolean): ToolAnswer {
  if (!step) return { outcome: 'failed', observation: 'The profile read’s browser step is gone.' };
  if (step.status === 'succeeded') return { outcome: 'completed', observation: profileObservation(step) };
  if (terminalStatuses.has(step.status) && !(timedOut && step.status === 'cancelled'))
    return { outcome: 'failed', observation: profileFailure(step) };
  return {
    outcome: 'failed',
    observation: `The profile read did not finish within ${profileReadWaitMinutes} minutes (its step is ${step.status === 'cancelled' ? 'cancelled now' : `still ${step.status}`}).`,
  };
}
