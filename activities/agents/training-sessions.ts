/**
 * A training session's side effects. Every change is an event decided by decideTraining
 * (domain/agents/training-sessions.ts) and written under a compare-and-set on the session's
 * revision: read, decide, write where the revision is still the one read. A transition the caller pinned with `expected_revision` is
 * refused (409) when the revision moved; the workflow's own writes re-read and re-apply instead,
 * so a retried activity or a verdict landing in between never loses a change. Model writes hold
 * their price first and charge it in the very transaction that stores the message.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { randomUUID } from 'node:crypto';
import { addVersion, lockCurrentAgentVersion, agentAtVersion } from '../../store/agents/outbound-agents.js';
import type { Db, Sql } from '../../db/sql.js';
import {
  factsFromFields,
  type AgentSlot,
  type ResearchFact,
  type WriteContext,
} from '../../domain/agents/outbound-agents.js';
import {
  TrainingRefusal,
  contextOf,
  decideTraining,
  draftProposal,
  expectedRevisionOf,
  ModelProposalSchema,
  type Proposal,
  type DraftedMessage,
  type Send,
  type TrainingContact,
  type TrainingEvent,
  type TrainingStep,
  type TrainingVerdict,
} from '../../domain/agents/training-sessions.js';
import type { ChatModel } from '../../integrations/chat-model.js';
import { chargeHold, releaseHold, type CreditHold } from '../../store/platform/credits.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { activityFailure, composeMessage, creditsOf, holdWritePrice, type Written } from './outbound-agent.js';
import { researchContact } from '../../services/agents/research.js';
import {
  SessionRow,
  loadSession,
  writeAttempts,
  TrainingAnswer,
  transitionOf,
  answer,
  snapshotOf,
  writeAtRevision,
  recordAppliedVersion,
} from '../../store/agents/training-sessions.js';

export interface TrainingActivityDeps {
  sql: Sql;
  chatModel: ChatModel | null;
  enrichmentProviders?: EnrichmentProviders;
}

export function refusal(error: unknown): unknown {
  return error instanceof TrainingRefusal ? ApplicationFailure.nonRetryable(error.message, error.code) : error;
}

/**
 * Decides `event` from the session as read (decideTraining) and writes the decision under the
 * compare-and-set on the revision (writeAtRevision), bumping it. A pinned event (one carrying
 * `expected_revision`) is refused when the revision moved, nothing written; an unpinned one that
 * lost a race re-reads and decides again, so a retried activity or a verdict landing in between
 * never loses a change. `inside` runs in the same transaction after the write (credits, agent
 * versions).
 */
export async function mutate(
  sql: Sql,
  sessionId: string,
  event: TrainingEvent,
  inside?: (tx: Db, row: SessionRow) => Promise<void>,
): Promise<SessionRow> {
  const expected = expectedRevisionOf(event);
  for (let tries = 0; ; tries += 1) {
    const current = await loadSession(sql, sessionId);
    if (!current) throw ApplicationFailure.nonRetryable('Training session not found.', 'not_found');
    const decision = decideTraining(snapshotOf(current), event);
    if (decision.kind === 'refuse') throw ApplicationFailure.nonRetryable(decision.message, decision.code);
    // `unchanged` is written too: the revision moves as it always has for the workflow's own writes.
    const next = decision.kind === 'write' ? decision.next : transitionOf(current);
    const written = await sql.begin(async (tx) => {
      const row = await writeAtRevision(tx, sessionId, current.revision, next);
      if (row && inside) await inside(tx, row);
      return row ? ((await loadSession(tx, sessionId)) ?? row) : null;
    });
    if (written) return written;
    if (expected !== undefined)
      throw ApplicationFailure.nonRetryable(
        'The session changed while this was applied; read it again and retry.',
        'conflict',
      );
    if (tries >= 20) throw ApplicationFailure.retryable('The session kept changing; trying again.', 'conflict_retry');
  }
}

export interface Drafted {
  slot: AgentSlot;
  written: Written | null;
  error: string | null;
  hold: CreditHold | null;
  ms: number;
}

export const sendOf = (written: Written | null, error: string | null): Send =>
  written
    ? {
        alone: written.assessment.review_reason === null,
        reason: written.assessment.review_reason,
        doubt: written.findings.find((f) => f.severity !== 'info')?.message ?? null,
      }
    : { alone: false, reason: 'error', doubt: error };

/**
 * The prompt update as the chat model drafts it from the lessons; null when it fails or answers
 * out of shape (the local draft is used then). Only slots the agent has are taken; drafting is free.
 */
export async function modelProposal(
  model: ChatModel,
  row: SessionRow,
  slots: AgentSlot[],
  local: Proposal,
): Promise<Proposal | null> {
  try {
    const answer = await model.complete({
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
    const parsed = ModelProposalSchema.safeParse(JSON.parse(answer.content));
    if (!parsed.success) return null;
    const changes = parsed.data.changes.flatMap((c) => {
      const slot = slots.find((s) => s.slot_key === c.slot_key);
      return slot && c.proposed !== slot.prompt
        ? [{ slot_key: c.slot_key, current: slot.prompt, proposed: c.proposed, rationale: c.rationale }]
        : [];
    });
    return changes.length > 0 ? { ...local, summary: parsed.data.summary, changes } : null;
  } catch {
    return null;
  }
}

export function createTrainingActivities(deps: TrainingActivityDeps) {
  const { sql, chatModel } = deps;
  const webPage = deps.enrichmentProviders?.get('web_page_reader');

  async function slotsOf(row: SessionRow): Promise<{ name: string; instructions: string; slots: AgentSlot[] }> {
    const agent = await agentAtVersion(sql, row.agent_id, row.base_version);
    if (!agent) throw ApplicationFailure.nonRetryable('The outbound agent of this session is gone.', 'not_found');
    return agent;
  }

  /** Writes every slot of one contact; a failure of the last attempt is kept as the message's error. */
  async function draftAll(
    row: SessionRow,
    contact: TrainingContact,
    brief: ResearchFact[],
    rewrite: boolean,
    attempt: number,
  ): Promise<Drafted[]> {
    const agent = await slotsOf(row);
    const drafted: Drafted[] = [];
    const thread: WriteContext['thread'] = [];
    try {
      for (const slot of agent.slots) {
        const started = Date.now();
        const round = contact.round + (rewrite ? 1 : 0);
        const ctx: WriteContext = {
          agentName: agent.name,
          instructions: agent.instructions,
          slot,
          contact: { ...contact.person, fields: Object.fromEntries(contact.fields.map((f) => [f.name, f.value])) },
          brief,
          lessons: row.doc.progress.lessons.concat(
            rewrite ? contact.notes.filter((n) => n.state === 'pending').map((n) => n.note) : [],
          ),
          thread,
          round,
        };
        let hold: CreditHold | null = null;
        try {
          hold = await holdWritePrice(
            sql,
            row.workspace_id,
            chatModel,
            `training:${row.id}:${contact.record_id}:${round}:${slot.slot_key}:${attempt}`,
          );
          const written = await composeMessage(chatModel, ctx);
          drafted.push({ slot, written, error: null, hold, ms: Date.now() - started });
          thread.push({ slot_key: slot.slot_key, subject: written.draft.subject, body: written.draft.body });
        } catch (error) {
          if (hold) await sql.begin((tx) => releaseHold(tx, hold!.id));
          const failure = activityFailure(error);
          // Retry while attempts remain; the last one keeps the error on the message.
          if (!failure.nonRetryable && attempt < writeAttempts) throw failure;
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

  async function settleHolds(tx: Db, drafted: Drafted[], stored: boolean) {
    for (const d of drafted) {
      if (!d.hold) continue;
      if (stored) await chargeHold(tx, d.hold.id, creditsOf(d.written!.priceTenths));
      else await releaseHold(tx, d.hold.id);
    }
  }

  return {
    /** Where the run stands (after a restart too): contacts still to write, rewrites still owed. */
    async beginTrainingSession({
      sessionId,
    }: {
      sessionId: string;
    }): Promise<TrainingAnswer & { toWrite: string[]; toRewrite: string[] }> {
      const row = await loadSession(sql, sessionId);
      if (!row) throw ApplicationFailure.nonRetryable('Training session not found.', 'not_found');
      const contacts = row.doc.contacts;
      return {
        ...answer(row),
        toWrite: contacts.filter((c) => c.state === 'waiting_write' || c.state === 'writing').map((c) => c.record_id),
        toRewrite: contacts
          .filter((c) => c.state === 'rewrite_queued' || c.state === 'rewriting')
          .map((c) => c.record_id),
      };
    },

    /** Writes (or, after a note, rewrites) every slot's message for one sample contact. */
    async writeTrainingContact({
      sessionId,
      recordId,
    }: {
      sessionId: string;
      recordId: string;
    }): Promise<TrainingAnswer> {
      const attempt = Context.current().info.attempt;
      const started = Date.now();
      // A retry after the write landed finds nothing owed (refused): it answers the session as it is.
      const begun = await mutate(sql, sessionId, { type: 'begin_write', record_id: recordId }).catch(
        (error: unknown) => {
          if (error instanceof ApplicationFailure && error.type === 'conflict') return null;
          throw error;
        },
      );
      if (!begun) return answer((await loadSession(sql, sessionId))!);
      const contact = begun.doc.contacts.find((c) => c.record_id === recordId)!;
      // A contact whose first write failed is written afresh, whatever its note.
      const rewrite = contact.state === 'rewriting' && contact.messages.length > 0;
      let context = contact.context;
      if (!rewrite || context.research_brief.length === 0) {
        const person = { ...contact.person, fields: Object.fromEntries(contact.fields.map((f) => [f.name, f.value])) };
        const research = await researchContact({ chatModel, webPage }, person, factsFromFields(person));
        context = contextOf(research.brief, research.sources);
      }
      const drafted = await draftAll(begun, contact, context.research_brief as ResearchFact[], rewrite, attempt);
      const failed = drafted.filter((d) => d.error).length;
      const step: TrainingStep = {
        action: rewrite ? 'rewrite_messages' : 'write_messages',
        detail: contact.label,
        duration_ms: Date.now() - started,
        observation: `${drafted.length - failed} of ${drafted.length} messages written${chatModel ? ` by ${chatModel.key}` : ' by the local template writer'}.`,
        outcome: failed === drafted.length && drafted.length > 0 ? 'failed' : 'completed',
        thought: rewrite
          ? `Rewriting from the note: ${contact.notes
              .filter((n) => n.state === 'pending')
              .map((n) => n.note)
              .join(' / ')}`
          : 'First draft from the research brief.',
      };
      const drafts: DraftedMessage[] = drafted.map((d) => ({
        id: randomUUID(),
        slot_key: d.slot.slot_key,
        kind: d.slot.kind,
        subject: d.written?.draft.subject ?? null,
        body: d.written?.draft.body ?? '',
        error: d.error,
        send: sendOf(d.written, d.error),
        reasoning: d.written?.draft.reasoning ?? '',
        facts_used: d.written?.draft.facts_used ?? [],
        model_key: d.written?.modelKey ?? '',
      }));
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
        if (error instanceof ApplicationFailure && error.type === 'conflict')
          return (await loadSession(sql, sessionId))!;
        throw error;
      });
      return answer(landed);
    },

    /** A write that could not run at all (no credits, agent gone): the session shows why, the contact waits for a person. */
    async recordTrainingError(input: { sessionId: string; recordId: string; error: string }): Promise<TrainingAnswer> {
      return answer(
        await mutate(sql, input.sessionId, { type: 'write_failed', record_id: input.recordId, error: input.error }),
      );
    },

    async finishInitialWrites({ sessionId }: { sessionId: string }): Promise<TrainingAnswer> {
      return answer(await mutate(sql, sessionId, { type: 'initial_writes_done' }));
    },

    async recordVerdict(input: {
      sessionId: string;
      request: TrainingVerdict;
      writingOther: boolean;
    }): Promise<TrainingAnswer> {
      return answer(
        await mutate(sql, input.sessionId, {
          type: 'verdict',
          request: input.request,
          writing_other: input.writingOther,
        }),
      );
    },

    async discardTrainingChanges(input: { sessionId: string; expectedRevision: number }): Promise<TrainingAnswer> {
      return answer(
        await mutate(sql, input.sessionId, { type: 'discard_changes', expected_revision: input.expectedRevision }),
      );
    },

    /** reviewing -> proposing -> proposed: the prompt update drafted from the active lessons. */
    async proposeTrainingUpdate({ sessionId }: { sessionId: string }): Promise<TrainingAnswer> {
      const started = Date.now();
      let row = await loadSession(sql, sessionId);
      if (row?.status === 'reviewing') {
        row =
          (await mutate(sql, sessionId, { type: 'start_proposing' }).catch((error: unknown) => {
            if (error instanceof ApplicationFailure && error.type === 'conflict') return null;
            throw error;
          })) ?? (await loadSession(sql, sessionId));
      }
      // Not (or no longer) proposing: a verdict or a close got there first. A retry finds `proposing` and drafts again.
      if (!row || row.status !== 'proposing') return answer(row ?? (await loadSession(sql, sessionId))!);
      const { slots } = await slotsOf(row);
      const local = draftProposal(transitionOf(row), slots, row.revision, randomUUID());
      const proposal =
        chatModel && local.changes.length > 0 ? ((await modelProposal(chatModel, row, slots, local)) ?? local) : local;
      const step: TrainingStep = {
        action: 'propose_update',
        detail: `${proposal.changes.length} slot change${proposal.changes.length === 1 ? '' : 's'}`,
        duration_ms: Date.now() - started,
        observation: proposal.summary,
        outcome: 'completed',
        thought: `Ready after ${row.doc.progress.in_a_row} Looks good in a row; ${row.doc.progress.lessons.length} lesson(s) to carry into the prompts${
          proposal === local ? ', drafted by adding them to each slot prompt' : `, drafted by ${chatModel!.key}`
        }.`,
      };
      const proposed = await mutate(sql, sessionId, { type: 'proposal_drafted', proposal, step });
      return answer(proposed);
    },

    /** proposed -> completed: the proposal becomes a new agent version, in the same transaction. */
    async applyTrainingProposal(input: { sessionId: string; expectedRevision: number }): Promise<TrainingAnswer> {
      const row = await mutate(
        sql,
        input.sessionId,
        { type: 'apply_proposal', expected_revision: input.expectedRevision },
        async (tx, session) => {
          const changes = session.doc.proposal?.changes ?? [];
          const agent = await lockCurrentAgentVersion(tx, session.agent_id);
          if (!agent) throw ApplicationFailure.nonRetryable('The outbound agent of this session is gone.', 'not_found');
          let applied = agent.version;
          if (changes.length > 0) {
            // On top of the agent as it is now: a slot edited since the session began takes the proposed prompt too.
            const slots = agent.slots.map((s) => ({
              ...s,
              prompt: changes.find((c) => c.slot_key === s.slot_key)?.proposed ?? s.prompt,
            }));
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
    },

    async abandonTrainingSession(input: { sessionId: string; expectedRevision: number }): Promise<TrainingAnswer> {
      return answer(
        await mutate(sql, input.sessionId, { type: 'abandon_proposal', expected_revision: input.expectedRevision }),
      );
    },

    async closeTrainingSession(input: { sessionId: string; expectedRevision?: number }): Promise<TrainingAnswer> {
      return answer(
        await mutate(sql, input.sessionId, {
          type: 'close',
          ...(input.expectedRevision !== undefined ? { expected_revision: input.expectedRevision } : {}),
        }),
      );
    },
  };
}
export type TrainingActivities = ReturnType<typeof createTrainingActivities>;
