/**
 * A training session's side effects. Every change is a transition of domain/training-sessions.ts
 * applied under a compare-and-set on the session's revision: read, apply, write where the
 * revision is still the one read. A transition the caller pinned with `expected_revision` is
 * refused (409) when the revision moved; the workflow's own writes re-read and re-apply instead,
 * so a retried activity or a verdict landing in between never loses a change. Model writes hold
 * their price first and charge it in the very transaction that stores the message.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { randomUUID } from 'node:crypto';
import { addVersion } from '../../store/agents/outbound-agents.js';
import type { Db, Sql } from '../../db/sql.js';
import { factsFromFields, type AgentSlot, type ResearchFact, type WriteContext } from '../../domain/agents/outbound-agents.js';
import {
    TrainingRefusal,
    beginWrite,
    contextOf,
    discardChanges,
    draftProposal,
    giveVerdict,
    landFirstWrite,
    landRewrite,
    liveStatuses,
    moveTo,
    readyToPropose,
    withProposal,
    ModelProposalSchema, type Proposal,
    type Send, type TrainingContact,
    type TrainingMessage, type TrainingStep,
    type TrainingVerdict,
    type Transition
} from '../../domain/agents/training-sessions.js';
import type { ChatModel } from '../../integrations/chat-model.js';
import { chargeHold, releaseHold, type CreditHold } from '../../store/platform/credits.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { activityFailure, composeMessage, creditsOf, holdWritePrice, type Written } from './outbound-agent.js';
import { researchContact } from '../../services/agents/research.js';
import { SessionRow, loadSession, writeAttempts, TrainingAnswer, transitionOf, owed, answer } from '../../store/agents/training-sessions.js';

export interface TrainingActivityDeps {
  sql: Sql;
  chatModel: ChatModel | null;
  enrichmentProviders?: EnrichmentProviders;
}


export function refusal(error: unknown): unknown {
  return error instanceof TrainingRefusal ? ApplicationFailure.nonRetryable(error.message, error.code) : error;
}

/**
 * Applies `change` under a compare-and-set on the revision, bumping it. `expected` pins the
 * revision (a stale one is refused, nothing written); without it, a lost race re-reads and
 * re-applies. `inside` runs in the same transaction after the write (credits, agent versions).
 */
export async function mutate(
  sql: Sql,
  sessionId: string,
  expected: number | undefined,
  change: (t: Transition, row: SessionRow) => Transition,
  inside?: (tx: Db, row: SessionRow) => Promise<void>,
): Promise<SessionRow> {
  for (let tries = 0; ; tries += 1) {
    const current = await loadSession(sql, sessionId);
    if (!current) throw ApplicationFailure.nonRetryable('Training session not found.', 'not_found');
    if (expected !== undefined && current.revision !== expected) {
      throw ApplicationFailure.nonRetryable(`The session is at revision ${current.revision}, not ${expected}; read it again and retry.`, 'conflict');
    }
    let next: Transition;
    try {
      next = change(transitionOf(current), current);
    } catch (error) {
      throw refusal(error);
    }
    const written = await sql.begin(async (tx) => {
      const [row] = await tx<SessionRow[]>`
        update training_sessions
        set status = ${next.head.status}, note_waiting = ${next.head.note_waiting}, error = ${next.head.error},
          doc = ${tx.json(next.doc as never)}, revision = revision + 1, updated_at = now()
        where id = ${sessionId} and revision = ${current.revision}
        returning *`;
      if (row && inside) await inside(tx, row);
      return row ? ((await loadSession(tx, sessionId)) ?? row) : null;
    });
    if (written) return written;
    if (expected !== undefined) throw ApplicationFailure.nonRetryable('The session changed while this was applied; read it again and retry.', 'conflict');
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
export async function modelProposal(model: ChatModel, row: SessionRow, slots: AgentSlot[], local: Proposal): Promise<Proposal | null> {
  try {
    const answer = await model.complete({
      json: true,
      temperature: 0.2,
      messages: [
        {
          role: 'system',
          content:
            'You improve the prompts of an outbound sales writing agent from reviewers\' lessons. Answer a JSON object ' +
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
      return slot && c.proposed !== slot.prompt ? [{ slot_key: c.slot_key, current: slot.prompt, proposed: c.proposed, rationale: c.rationale }] : [];
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
    const [agent] = await sql<{ name: string; instructions: string; slots: AgentSlot[] }[]>`
      select a.name, v.instructions, v.slots from outbound_agents a
      join outbound_agent_versions v on v.agent_id = a.id and v.version = ${row.base_version}
      where a.id = ${row.agent_id}`;
    if (!agent) throw ApplicationFailure.nonRetryable('The outbound agent of this session is gone.', 'not_found');
    return agent;
  }

  /** Writes every slot of one contact; a failure of the last attempt is kept as the message's error. */
  async function draftAll(row: SessionRow, contact: TrainingContact, brief: ResearchFact[], rewrite: boolean, attempt: number): Promise<Drafted[]> {
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
          lessons: row.doc.progress.lessons.concat(rewrite ? contact.notes.filter((n) => n.state === 'pending').map((n) => n.note) : []),
          thread,
          round,
        };
        let hold: CreditHold | null = null;
        try {
          hold = await holdWritePrice(sql, row.workspace_id, chatModel, `training:${row.id}:${contact.record_id}:${round}:${slot.slot_key}:${attempt}`);
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
    async beginTrainingSession({ sessionId }: { sessionId: string }): Promise<TrainingAnswer & { toWrite: string[]; toRewrite: string[] }> {
      const row = await loadSession(sql, sessionId);
      if (!row) throw ApplicationFailure.nonRetryable('Training session not found.', 'not_found');
      const contacts = row.doc.contacts;
      return {
        ...answer(row),
        toWrite: contacts.filter((c) => c.state === 'waiting_write' || c.state === 'writing').map((c) => c.record_id),
        toRewrite: contacts.filter((c) => c.state === 'rewrite_queued' || c.state === 'rewriting').map((c) => c.record_id),
      };
    },

    /** Writes (or, after a note, rewrites) every slot's message for one sample contact. */
    async writeTrainingContact({ sessionId, recordId }: { sessionId: string; recordId: string }): Promise<TrainingAnswer> {
      const attempt = Context.current().info.attempt;
      const started = Date.now();
      const begun = await mutate(sql, sessionId, undefined, (t) => {
        if (!liveStatuses.includes(t.head.status)) throw new TrainingRefusal(`The session is ${t.head.status}.`);
        // A retry after the write landed finds nothing owed: it answers the session as it is.
        const state = t.doc.contacts.find((c) => c.record_id === recordId)?.state;
        if (!state || !owed.includes(state)) throw new TrainingRefusal('Nothing to write for this contact.');
        return beginWrite(t, recordId);
      }).catch((error: unknown) => {
        if (error instanceof ApplicationFailure && error.type === 'conflict') return null;
        throw error;
      });
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
        thought: rewrite ? `Rewriting from the note: ${contact.notes.filter((n) => n.state === 'pending').map((n) => n.note).join(' / ')}` : 'First draft from the research brief.',
      };
      let stored = false;
      const landed = await mutate(
        sql,
        sessionId,
        undefined,
        (t) => {
          // Closed meanwhile: the write is dropped and its credits go back.
          if (!liveStatuses.includes(t.head.status)) throw new TrainingRefusal(`The session is ${t.head.status}.`);
          const now = t.doc.contacts.find((c) => c.record_id === recordId)?.state;
          if (now !== 'writing' && now !== 'rewriting') throw new TrainingRefusal('The contact is no longer being written.');
          if (!rewrite) {
            const messages: TrainingMessage[] = drafted.map((d, i) => ({
              id: randomUUID(),
              kind: d.slot.kind,
              title: d.slot.slot_key,
              timing: i === 0 ? 'first message' : `follow-up ${i}`,
              subject: d.written?.draft.subject ?? null,
              body: d.written?.draft.body ?? '',
              authored: true,
              conditional: false,
              edited_body: null,
              edited_subject: null,
              error: d.error,
              facts_used: d.written?.draft.facts_used ?? [],
              note: null,
              previous_body: null,
              previous_subject: null,
              reasoning: d.written?.draft.reasoning ?? '',
              reply_to_step_id: null,
              steps: [],
              proposed_body: null,
              proposed_error: null,
              proposed_subject: null,
              send: sendOf(d.written, d.error),
              proposed_send: null,
              model_key: d.written?.modelKey ?? '',
            }));
            return landFirstWrite(t, recordId, messages, context, step);
          }
          const current = t.doc.contacts.find((c) => c.record_id === recordId)!;
          const rewrites = new Map(
            current.messages.map((m) => {
              const d = drafted.find((x) => x.slot.slot_key === m.title);
              return [
                m.id,
                {
                  subject: d?.written?.draft.subject ?? null,
                  body: d?.written?.draft.body ?? '',
                  error: d ? d.error : 'The agent no longer has this slot.',
                  send: sendOf(d?.written ?? null, d?.error ?? null),
                  reasoning: d?.written?.draft.reasoning ?? '',
                  facts_used: d?.written?.draft.facts_used ?? [],
                },
              ] as const;
            }),
          );
          return landRewrite(t, recordId, rewrites, step);
        },
        async (tx) => {
          // Charged in the transaction that stores the messages; `stored` tells the failure path not to release.
          await settleHolds(tx, drafted, true);
          stored = true;
        },
      ).catch(async (error: unknown) => {
        if (!stored) await sql.begin((tx) => settleHolds(tx, drafted, false));
        if (error instanceof ApplicationFailure && error.type === 'conflict') return (await loadSession(sql, sessionId))!;
        throw error;
      });
      return answer(landed);
    },

    /** A write that could not run at all (no credits, agent gone): the session shows why, the contact waits for a person. */
    async recordTrainingError(input: { sessionId: string; recordId: string; error: string }): Promise<TrainingAnswer> {
      const row = await mutate(sql, input.sessionId, undefined, (t) => {
        const next = structuredClone(t);
        next.head.error = input.error.slice(0, 2000);
        const contact = next.doc.contacts.find((c) => c.record_id === input.recordId);
        if (contact && (contact.state === 'writing' || contact.state === 'rewriting' || contact.state === 'waiting_write' || contact.state === 'rewrite_queued')) {
          contact.state = 'awaiting_verdict';
          contact.notice = `Could not be written: ${input.error.slice(0, 300)} Give a note to try again.`;
        }
        next.head.note_waiting = next.doc.contacts.some((c) => c.state === 'rewrite_queued');
        return next;
      });
      return answer(row);
    },

    async finishInitialWrites({ sessionId }: { sessionId: string }): Promise<TrainingAnswer> {
      const row = await mutate(sql, sessionId, undefined, (t) => (t.head.status === 'running' ? moveTo(t, ['running'], 'reviewing', 'start reviewing') : t));
      return answer(row);
    },

    async recordVerdict(input: { sessionId: string; request: TrainingVerdict; writingOther: boolean }): Promise<TrainingAnswer> {
      return answer(await mutate(sql, input.sessionId, input.request.expected_revision, (t) => giveVerdict(t, input.request, input.writingOther)));
    },

    async discardTrainingChanges(input: { sessionId: string; expectedRevision: number }): Promise<TrainingAnswer> {
      return answer(await mutate(sql, input.sessionId, input.expectedRevision, (t) => discardChanges(t)));
    },

    /** reviewing -> proposing -> proposed: the prompt update drafted from the active lessons. */
    async proposeTrainingUpdate({ sessionId }: { sessionId: string }): Promise<TrainingAnswer> {
      const started = Date.now();
      let row = await loadSession(sql, sessionId);
      if (row?.status === 'reviewing') {
        row =
          (await mutate(sql, sessionId, undefined, (t) => {
            if (!readyToPropose(t)) throw new TrainingRefusal('The session is not ready to propose.');
            return moveTo(t, ['reviewing'], 'proposing', 'propose');
          }).catch((error: unknown) => {
            if (error instanceof ApplicationFailure && error.type === 'conflict') return null;
            throw error;
          })) ?? (await loadSession(sql, sessionId));
      }
      // Not (or no longer) proposing: a verdict or a close got there first. A retry finds `proposing` and drafts again.
      if (!row || row.status !== 'proposing') return answer(row ?? (await loadSession(sql, sessionId))!);
      const { slots } = await slotsOf(row);
      const local = draftProposal(transitionOf(row), slots, row.revision, randomUUID());
      const proposal = chatModel && local.changes.length > 0 ? ((await modelProposal(chatModel, row, slots, local)) ?? local) : local;
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
      const proposed = await mutate(sql, sessionId, undefined, (t) => (t.head.status === 'proposing' ? withProposal(t, proposal, step) : t));
      return answer(proposed);
    },

    /** proposed -> completed: the proposal becomes a new agent version, in the same transaction. */
    async applyTrainingProposal(input: { sessionId: string; expectedRevision: number }): Promise<TrainingAnswer> {
      const row = await mutate(
        sql,
        input.sessionId,
        input.expectedRevision,
        (t) => moveTo(t, ['proposed'], 'completed', 'apply a proposal'),
        async (tx, session) => {
          const changes = session.doc.proposal?.changes ?? [];
          const [agent] = await tx<{ version: number; instructions: string; slots: AgentSlot[] }[]>`
            select a.version, v.instructions, v.slots from outbound_agents a
            join outbound_agent_versions v on v.agent_id = a.id and v.version = a.version
            where a.id = ${session.agent_id} for update of a`;
          if (!agent) throw ApplicationFailure.nonRetryable('The outbound agent of this session is gone.', 'not_found');
          let applied = agent.version;
          if (changes.length > 0) {
            // On top of the agent as it is now: a slot edited since the session began takes the proposed prompt too.
            const slots = agent.slots.map((s) => ({ ...s, prompt: changes.find((c) => c.slot_key === s.slot_key)?.proposed ?? s.prompt }));
            applied = await addVersion(tx, session.agent_id, { instructions: agent.instructions, slots }, `training:${session.id}`);
          }
          await tx`update training_sessions set applied_version = ${applied} where id = ${session.id}`;
        },
      );
      return answer(row);
    },

    async abandonTrainingSession(input: { sessionId: string; expectedRevision: number }): Promise<TrainingAnswer> {
      return answer(await mutate(sql, input.sessionId, input.expectedRevision, (t) => moveTo(t, ['proposed'], 'abandoned', 'abandon a proposal')));
    },

    async closeTrainingSession(input: { sessionId: string; expectedRevision?: number }): Promise<TrainingAnswer> {
      return answer(await mutate(sql, input.sessionId, input.expectedRevision, (t) => moveTo(t, liveStatuses, 'abandoned', 'be closed')));
    },
  };
}
export type TrainingActivities = ReturnType<typeof createTrainingActivities>;
