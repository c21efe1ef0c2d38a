/**
 * A training session's use cases, one per activity of the `training-session/<id>` workflow
 * (workflows/agents/training-session.ts). Every change is an event decided by decideTraining
 * (domain/agents/training-sessions.ts) and written under a compare-and-set on the session's
 * revision (`mutate`): read, decide, write where the revision is still the one read. A transition
 * the caller pinned with `expected_revision` is refused (409) when the revision moved; the
 * workflow's own writes re-read and re-apply instead, so a retried activity or a verdict landing
 * in between never loses a change. Model writes hold their price first and charge it in the very
 * transaction that stores the message.
 *
 * Failures are TypedFailures typed for the workflow's retry policies (`conflict`, `not_found`
 * never retried; `conflict_retry` retried), which the activity doors translate
 * (activities/shared/failures.ts): these use cases run only as activities.
 */
import { randomUUID } from 'node:crypto';
import type { Db, Sql } from '../../db/sql.js';
import {
  factsFromFields,
  type AgentSlot,
  type ResearchFact,
  type WriteContext,
} from '../../domain/agents/outbound-agents.js';
import { creditsOf } from '../../domain/agents/outbound-writing.js';
import {
  contactInputOf,
  draftedMessage,
  isRewrite,
  needsResearch,
  proposalFromModel,
  proposalStep,
  slotsWithProposal,
  trainingHoldKey,
  trainingWriteContext,
  writeRound,
  writeStep,
  writesOwed,
  type SlotOutcome,
} from '../../domain/agents/training-session-drafts.js';
import type { Proposal, TrainingContact, TrainingVerdict } from '../../domain/agents/training-session-schemas.js';
import {
  contextOf,
  decideTraining,
  draftProposal,
  expectedRevisionOf,
  type TrainingEvent,
} from '../../domain/agents/training-sessions.js';
import { TypedFailure, nonRetryable, retryable } from '../../domain/shared/errors.js';
import type { ChatModel } from '../../integrations/chat-model.js';
import { addVersion, agentAtVersion, lockCurrentAgentVersion } from '../../store/agents/outbound-agents.js';
import {
  answer,
  loadSession,
  recordAppliedVersion,
  snapshotOf,
  transitionOf,
  writeAtRevision,
  writeAttempts,
  type SessionRow,
  type TrainingAnswer,
} from '../../store/agents/training-sessions.js';
import { chargeHold, releaseHold, type CreditHold } from '../../store/platform/credits.js';
import type { ServiceDeps } from '../deps.js';
import type { OutboundAgentDeps } from './outbound-agent.js';
import { composeMessage, holdWritePrice, writeFailureOf } from './outbound-writer.js';
import { researchContact } from './research.js';

/** A session's writes and proposals: the database, the chat model (null: the local template writer and drafter), the page reader. */
type WriterDeps = Pick<OutboundAgentDeps, 'sql' | 'chatModel' | 'enrichmentProviders'>;

export interface SessionInput {
  sessionId: string;
}
export interface ContactWriteInput {
  sessionId: string;
  recordId: string;
}
export interface RevisionInput {
  sessionId: string;
  expectedRevision: number;
}

/**
 * Decides `event` from the session as read (decideTraining) and writes the decision under the
 * compare-and-set on the revision (writeAtRevision), bumping it. A pinned event (one carrying
 * `expected_revision`) is refused when the revision moved, nothing written; an unpinned one that
 * lost a race re-reads and decides again, so a retried activity or a verdict landing in between
 * never loses a change. `inside` runs in the same transaction after the write (credits, agent
 * versions).
 */
async function mutate(
  sql: Sql,
  sessionId: string,
  event: TrainingEvent,
  inside?: (tx: Db, row: SessionRow) => Promise<void>,
): Promise<SessionRow> {
  const expected = expectedRevisionOf(event);
  for (let tries = 0; ; tries += 1) {
    const current = await loadSession(sql, sessionId);
    if (!current) throw nonRetryable('Training session not found.', 'not_found');
    const decision = decideTraining(snapshotOf(current), event);
    if (decision.kind === 'refuse') throw nonRetryable(decision.message, decision.code);
    // `unchanged` is written too: the revision moves as it always has for the workflow's own writes.
    const next = decision.kind === 'write' ? decision.next : transitionOf(current);
    const written = await sql.begin(async (tx) => {
      const row = await writeAtRevision(tx, sessionId, current.revision, next);
      if (row && inside) await inside(tx, row);
      return row ? ((await loadSession(tx, sessionId)) ?? row) : null;
    });
    if (written) return written;
    if (expected !== undefined)
      throw nonRetryable('The session changed while this was applied; read it again and retry.', 'conflict');
    if (tries >= 20) throw retryable('The session kept changing; trying again.', 'conflict_retry');
  }
}

/** `mutate`, with a refusal (`conflict`) answered as null: the workflow's own step found nothing left to do. */
const unlessRefused = (written: Promise<SessionRow>): Promise<SessionRow | null> =>
  written.catch((error: unknown) => {
    if (error instanceof TypedFailure && error.type === 'conflict') return null;
    throw error;
  });

async function agentOf(sql: Sql, row: SessionRow): Promise<{ name: string; instructions: string; slots: AgentSlot[] }> {
  const agent = await agentAtVersion(sql, row.agent_id, row.base_version);
  if (!agent) throw nonRetryable('The outbound agent of this session is gone.', 'not_found');
  return agent;
}

interface Drafted extends SlotOutcome {
  hold: CreditHold | null;
  ms: number;
}

/** Writes every slot of one contact; a failure of the last attempt is kept as the message's error. */
async function draftAll(
  { sql, chatModel }: WriterDeps,
  row: SessionRow,
  contact: TrainingContact,
  brief: ResearchFact[],
  rewrite: boolean,
  attempt: number,
): Promise<Drafted[]> {
  const agent = await agentOf(sql, row);
  const drafted: Drafted[] = [];
  const thread: WriteContext['thread'] = [];
  try {
    for (const slot of agent.slots) {
      const started = Date.now();
      const ctx = trainingWriteContext(agent, slot, contact, brief, row.doc.progress.lessons, thread, rewrite);
      let hold: CreditHold | null = null;
      try {
        const causeKey = trainingHoldKey(
          row.id,
          contact.record_id,
          writeRound(contact, rewrite),
          slot.slot_key,
          attempt,
        );
        hold = await holdWritePrice(sql, row.workspace_id, chatModel, causeKey);
        const written = await composeMessage(chatModel, ctx);
        drafted.push({ slot, written, error: null, hold, ms: Date.now() - started });
        thread.push({ slot_key: slot.slot_key, subject: written.draft.subject, body: written.draft.body });
      } catch (error) {
        if (hold) await sql.begin((tx) => releaseHold(tx, hold!.id));
        const failure = writeFailureOf(error);
        // Retry while attempts remain; the last one keeps the error on the message.
        if (failure.retryable && attempt < writeAttempts) throw failure;
        drafted.push({ slot, written: null, error: failure.message, hold: null, ms: Date.now() - started });
      }
    }
  } catch (error) {
    await sql.begin(async (tx) => {
      for (const d of drafted) if (d.hold) await releaseHold(tx, d.hold.id);
    });
    throw error;
  }
  return drafted;
}

/** Charges each held price (`stored`: the messages were written in this transaction) or releases it. */
async function settleHolds(tx: Db, drafted: Drafted[], stored: boolean) {
  for (const d of drafted) {
    if (!d.hold) continue;
    if (stored) await chargeHold(tx, d.hold.id, creditsOf(d.written!.priceTenths));
    else await releaseHold(tx, d.hold.id);
  }
}

/** Where the run stands (after a restart too): contacts still to write, rewrites still owed. */
export async function beginTrainingSession(
  { sql }: Pick<ServiceDeps, 'sql'>,
  { sessionId }: SessionInput,
): Promise<TrainingAnswer & { toWrite: string[]; toRewrite: string[] }> {
  const row = await loadSession(sql, sessionId);
  if (!row) throw nonRetryable('Training session not found.', 'not_found');
  return { ...answer(row), ...writesOwed(row.doc) };
}

/**
 * Writes (or, after a note, rewrites) every slot's message for one sample contact. `attempt` is
 * the activity's: it keys the credit holds, and the last one keeps a write's error on its message.
 */
export async function writeTrainingContact(
  deps: WriterDeps,
  { sessionId, recordId }: ContactWriteInput,
  attempt: number,
): Promise<TrainingAnswer> {
  const { sql, chatModel } = deps;
  const started = Date.now();
  // A retry after the write landed finds nothing owed (refused): it answers the session as it is.
  const begun = await unlessRefused(mutate(sql, sessionId, { type: 'begin_write', record_id: recordId }));
  if (!begun) return answer((await loadSession(sql, sessionId))!);
  const contact = begun.doc.contacts.find((c) => c.record_id === recordId)!;
  const rewrite = isRewrite(contact);
  let context = contact.context;
  if (needsResearch(contact, rewrite)) {
    const person = contactInputOf(contact);
    const webPage = deps.enrichmentProviders?.get('web_page_reader');
    const research = await researchContact({ chatModel, webPage }, person, factsFromFields(person));
    context = contextOf(research.brief, research.sources);
  }
  const drafted = await draftAll(deps, begun, contact, context.research_brief as ResearchFact[], rewrite, attempt);
  const step = writeStep(contact, rewrite, drafted, chatModel, Date.now() - started);
  const drafts = drafted.map((d) => draftedMessage(randomUUID(), d));
  let stored = false;
  // Closed meanwhile, or the contact no longer being written: refused, and the credits go back.
  const landed = await mutate(
    sql,
    sessionId,
    { type: 'write_landed', record_id: recordId, rewrite, drafts, context, step },
    async (tx) => {
      // Charged in the transaction that stores the messages; `stored` tells the failure path not to release.
      await settleHolds(tx, drafted, true);
      stored = true;
    },
  ).catch(async (error: unknown) => {
    if (!stored) await sql.begin((tx) => settleHolds(tx, drafted, false));
    if (error instanceof TypedFailure && error.type === 'conflict') return (await loadSession(sql, sessionId))!;
    throw error;
  });
  return answer(landed);
}

/** A write that could not run at all (no credits, agent gone): the session shows why, the contact waits for a person. */
export async function recordTrainingError(
  { sql }: Pick<ServiceDeps, 'sql'>,
  input: { sessionId: string; recordId: string; error: string },
): Promise<TrainingAnswer> {
  return answer(
    await mutate(sql, input.sessionId, { type: 'write_failed', record_id: input.recordId, error: input.error }),
  );
}

/** running -> reviewing once every sample contact was written (unchanged in any other status). */
export async function finishInitialWrites(
  { sql }: Pick<ServiceDeps, 'sql'>,
  { sessionId }: SessionInput,
): Promise<TrainingAnswer> {
  return answer(await mutate(sql, sessionId, { type: 'initial_writes_done' }));
}

/** Looks good or a note (operationId giveTrainingVerdict); `writingOther`: a write of another contact is under way. */
export async function recordVerdict(
  { sql }: Pick<ServiceDeps, 'sql'>,
  input: { sessionId: string; request: TrainingVerdict; writingOther: boolean },
): Promise<TrainingAnswer> {
  return answer(
    await mutate(sql, input.sessionId, { type: 'verdict', request: input.request, writing_other: input.writingOther }),
  );
}

/** operationId discardTrainingChanges: the latest pending rewrite and its lesson dropped. */
export async function discardTrainingChanges(
  { sql }: Pick<ServiceDeps, 'sql'>,
  input: RevisionInput,
): Promise<TrainingAnswer> {
  return answer(
    await mutate(sql, input.sessionId, { type: 'discard_changes', expected_revision: input.expectedRevision }),
  );
}

/**
 * The prompt update as the chat model drafts it from the lessons; null when it fails or answers
 * out of shape (the local draft is used then). Only slots the agent has are taken; drafting is free.
 */
async function modelProposal(
  model: ChatModel,
  row: SessionRow,
  slots: AgentSlot[],
  local: Proposal,
): Promise<Proposal | null> {
  try {
    const reply = await model.complete({
      json: true,
      temperature: 0.2,
      messages: [
        {
          role: 'system',
          content:
            "You improve the prompts of an outbound sales writing agent from reviewers' lessons. Answer a JSON object " +
            '{"summary": one sentence, "changes": [{"slot_key", "proposed": the full new prompt of that slot, "rationale"}]} ' +
            'changing only the slots the lessons concern.',
        },
        {
          role: 'user',
          content: `Slots:\n${slots.map((s) => `[${s.slot_key}] ${s.prompt}`).join('\n')}\n\nLessons:\n${row.doc.progress.lessons.map((l) => `- ${l}`).join('\n')}`,
        },
      ],
    });
    return proposalFromModel(reply.content, slots, local);
  } catch {
    return null;
  }
}

/** reviewing -> proposing -> proposed: the prompt update drafted from the active lessons. */
export async function proposeTrainingUpdate(
  { sql, chatModel }: Pick<WriterDeps, 'sql' | 'chatModel'>,
  { sessionId }: SessionInput,
): Promise<TrainingAnswer> {
  const started = Date.now();
  let row = await loadSession(sql, sessionId);
  if (row?.status === 'reviewing')
    row =
      (await unlessRefused(mutate(sql, sessionId, { type: 'start_proposing' }))) ?? (await loadSession(sql, sessionId));
  // Not (or no longer) proposing: a verdict or a close got there first. A retry finds `proposing` and drafts again.
  if (!row || row.status !== 'proposing') return answer(row ?? (await loadSession(sql, sessionId))!);
  const { slots } = await agentOf(sql, row);
  const local = draftProposal(transitionOf(row), slots, row.revision, randomUUID());
  const proposal =
    chatModel && local.changes.length > 0 ? ((await modelProposal(chatModel, row, slots, local)) ?? local) : local;
  const step = proposalStep(
    proposal,
    row.doc.progress,
    proposal === local ? null : chatModel!.key,
    Date.now() - started,
  );
  return answer(await mutate(sql, sessionId, { type: 'proposal_drafted', proposal, step }));
}

/** proposed -> completed (operationId applyTrainingProposal): the proposal becomes a new agent version, in the same transaction. */
export async function applyTrainingProposal(
  { sql }: Pick<ServiceDeps, 'sql'>,
  input: RevisionInput,
): Promise<TrainingAnswer> {
  const row = await mutate(
    sql,
    input.sessionId,
    { type: 'apply_proposal', expected_revision: input.expectedRevision },
    async (tx, session) => {
      const changes = session.doc.proposal?.changes ?? [];
      const agent = await lockCurrentAgentVersion(tx, session.agent_id);
      if (!agent) throw nonRetryable('The outbound agent of this session is gone.', 'not_found');
      let applied = agent.version;
      if (changes.length > 0) {
        // On top of the agent as it is now: a slot edited since the session began takes the proposed prompt too.
        const slots = slotsWithProposal(agent.slots, changes);
        applied = await addVersion(
          tx,
          session.agent_id,
          { instructions: agent.instructions, slots },
          `training:${session.id}`,
        );
      }
      await recordAppliedVersion(tx, session.id, applied);
    },
  );
  return answer(row);
}

/** proposed -> abandoned (operationId abandonTrainingProposal): the agent is left as it was. */
export async function abandonTrainingSession(
  { sql }: Pick<ServiceDeps, 'sql'>,
  input: RevisionInput,
): Promise<TrainingAnswer> {
  return answer(
    await mutate(sql, input.sessionId, { type: 'abandon_proposal', expected_revision: input.expectedRevision }),
  );
}

/** Any live status -> abandoned (operationId closeTrainingSession); the revision is checked when the caller gave one. */
export async function closeTrainingSession(
  { sql }: Pick<ServiceDeps, 'sql'>,
  input: { sessionId: string; expectedRevision?: number },
): Promise<TrainingAnswer> {
  return answer(
    await mutate(sql, input.sessionId, {
      type: 'close',
      ...(input.expectedRevision !== undefined ? { expected_revision: input.expectedRevision } : {}),
    }),
  );
}
