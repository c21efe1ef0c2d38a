/**
 * Records representative workflow histories into test/histories/ for the replay test:
 * `npm run record:histories` adds the ones not recorded yet; existing files are never rewritten
 * (without --force), since replaying them against new code is the point.
 */
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { browserStepWorkflow } from '../workflows/pnet/browser-step.js';
import {
  approveStepUpdate,
  browserStepWorkflowId,
  browserStepStateQuery,
  cancelStepUpdate,
  retryStepUpdate,
  stepChangedSignal,
} from '../workflows/pnet/browser-step.contract.js';
import { stepSignalSweeperWorkflow } from '../workflows/pnet/step-signals.js';
import type { StoredStepStatus } from '../domain/pnet/steps.js';
import { stepSignalSweeperWorkflowId } from '../workflows/pnet/step-signals.contract.js';
import { creditHoldWorkflow } from '../workflows/platform/credit-hold.js';
import { creditHoldSettledSignal, creditHoldWorkflowId } from '../workflows/platform/credit-hold.contract.js';
import { ApplicationFailure } from '@temporalio/common';
import { columnRunWorkflow } from '../workflows/tables/column-run.js';
import {
  cancelColumnRunSignal,
  columnRunWorkflowId,
  rowsAddedSignal,
} from '../workflows/tables/column-run.contract.js';
import { senderAccountWorkflow } from '../workflows/pnet/sender-account.js';
import { accountChangedSignal, senderAccountWorkflowId } from '../workflows/pnet/sender-account.contract.js';
import { projectRoot, resolveTool, temporalTestServer } from '../worker/tools.js';
import { workflowsPath } from '../worker/worker.js';
import type { AgentDecision, AgentRunActivities, ProfileReadQueued } from '../activities/agents/agent-run.js';
import type { RecordedStep } from '../store/agents/agent-runs.js';
import { type TrainingActivities } from '../activities/agents/training-sessions.js';
import {
  beginWrite,
  discardChanges,
  draftProposal,
  giveVerdict,
  landFirstWrite,
  landRewrite,
  liveStatuses,
  moveTo,
  newDoc,
  readyToPropose,
  TrainingRefusal,
  withProposal,
  type Transition,
} from '../domain/agents/training-sessions.js';
import type { TrainingMessage, TrainingVerdict } from '../domain/agents/training-session-schemas.js';
import { agentRunWorkflow, agentTrainingWorkflow } from '../workflows/agents/agent-run.js';
import {
  agentCellRunWorkflowId,
  agentExampleRunWorkflowId,
  agentTrainingWorkflowId,
  cancelAgentRunUpdate,
  pnetStepSettledSignal,
} from '../workflows/agents/agent-run.contract.js';
import { trainingSessionWorkflow } from '../workflows/agents/training-session.js';
import {
  applyProposalUpdate,
  discardChangesUpdate,
  giveVerdictUpdate,
  trainingSessionWorkflowId,
  trainingStateQuery,
  type TrainingWorkflowState,
} from '../workflows/agents/training-session.contract.js';
import type { ContactAction, SequenceActivities } from '../activities/sequences/sequences.js';
import type { OutboundAgentActivities, WriteStepMessageResult } from '../activities/agents/outbound-agent.js';
import type { MailerActivities } from '../activities/sequences/mailer.js';
import { sequenceContactWorkflow, sequenceFeedWorkflow } from '../workflows/sequences/sequence-contact.js';
import {
  sequenceContactStateQuery,
  sequenceContactWorkflowId,
  sequenceFeedWorkflowId,
  wakeContactSignal,
} from '../workflows/sequences/sequence-contact.contract.js';
import { mailboxPollWorkflow } from '../workflows/inbox/mailbox-poll.js';
import {
  mailboxPollStateQuery,
  mailboxPollWorkflowId,
  pollMailboxNowSignal,
} from '../workflows/inbox/mailbox-poll.contract.js';
import type { InboxActivities } from '../activities/inbox/inbox.js';
import type { MailboxPollResult } from '../domain/inbox/inbox.js';
import { SessionRow, TrainingAnswer, toSession, viewOf } from '../store/agents/training-sessions.js';
import type { AssistantTurnActivities } from '../activities/assistant/turn.js';
import type { CardActivities } from '../activities/assistant/cards.js';
import { assistantTurnWorkflow } from '../workflows/assistant/assistant-turn.js';
import {
  assistantTurnQuery,
  assistantTurnWorkflowId,
  decideCardsUpdate,
} from '../workflows/assistant/assistant-turn.contract.js';
import type { ChatAttachmentActivities } from '../activities/assistant/attachments.js';
import { chatAttachmentWorkflow } from '../workflows/assistant/chat-attachment.js';
import { chatAttachmentWorkflowId } from '../workflows/assistant/chat-attachment.contract.js';
import { documentWorkflow } from '../workflows/documents/document.js';
import { documentWorkflowId } from '../workflows/documents/document.contract.js';
import type { DocumentActivities } from '../activities/documents/documents.js';
import {
  notificationBatchWorkflow,
  notificationDigestWorkflow,
  notificationReplayWorkflow,
} from '../workflows/notifications/notification-event.js';
import {
  notificationBatchWorkflowId,
  notificationReplayWorkflowId,
} from '../workflows/notifications/notification-event.contract.js';
import type { NotificationActivities } from '../activities/notifications/notifications.js';
import { leadSearchWorkflow } from '../workflows/sourcing/lead-search.js';
import type { LeadSearchActivities } from '../activities/sourcing/lead-search.js';
import { importRunWorkflow, writeBackWorkflow } from '../workflows/sourcing/imports.js';
import type { CrmActivities } from '../activities/sourcing/crm.js';
import { subdomainDiscoveryWorkflow } from '../workflows/sourcing/subdomains.js';
import type { SubdomainActivities } from '../activities/sourcing/subdomains.js';
import { workspaceBillingWorkflow } from '../workflows/billing/workspace-billing.js';
import { billingChangedSignal, workspaceBillingWorkflowId } from '../workflows/billing/workspace-billing.contract.js';
import type { BillingActivities } from '../activities/billing/billing.js';
import { affiliatePayoutCycleWorkflow } from '../workflows/affiliates/payout-cycle.js';
import { payoutCycleWorkflowId } from '../workflows/affiliates/payout-cycle.contract.js';
import type { AffiliatePayoutActivities } from '../activities/affiliates/payouts.js';
import { commissionMaturationWorkflow } from '../workflows/affiliates/commission-maturation.js';
import {
  commissionMaturationWorkflowId,
  maturationWakeSignal,
} from '../workflows/affiliates/commission-maturation.contract.js';
import type { CommissionMaturationActivities } from '../activities/affiliates/maturation.js';

const env = await TestWorkflowEnvironment.createTimeSkipping({
  server: { executable: { type: 'existing-path', path: resolveTool(temporalTestServer) } },
});
const taskQueue = 'record-histories';
// Column runs: the first claim hands out rows, the next finds none; a row of the cancelled run
// waits until the cancel signal is in, so the history holds it mid-run.
const claims = new Map<string, number>();
const renewedStepId = '00000000-0000-4000-8000-000000000009';
/** What each step's row says when its workflow reads a change the API committed, in order. */
const stepChanges = new Map<string, StoredStepStatus[]>();
let releaseSlowRows: () => void = () => {};
const slowRows = new Promise<void>((resolve) => (releaseSlowRows = resolve));
let slowStarted = 0;
// Agent runs: each run's model answers are scripted by run id; the tools answer as the real
// activities would (a step recorded, a profile read queued or refused), without a database.
const decision = (
  action: AgentDecision['action'],
  args: Record<string, unknown> = {},
  extra: Partial<AgentDecision> = {},
): AgentDecision => ({
  action,
  thought: `Next: ${action}.`,
  args,
  values: null,
  problem: null,
  ...extra,
});
const finish = (values: Record<string, unknown>) => decision('finish', {}, { values });
const agentScripts: Record<string, { maxSteps: number; decisions: AgentDecision[] }> = {
  // A search, an answer that was no usable step, a profile read woken by its step's settling, the answer.
  'run-researched': {
    maxSteps: 4,
    decisions: [
      decision('search', { query: 'Ada Lovelace Analytical Engines Ltd' }),
      decision('finish', {}, { problem: 'The answer was not a JSON object.' }),
      decision('read_pnet_profile', { profile_url: 'https://pnet.example/in/ada' }),
      finish({ title: 'Founder' }),
    ],
  },
  // The profile read is refused (not offered); the next tool is past the step bound, so the run fails.
  'run-tool-refused': {
    maxSteps: 1,
    decisions: [
      decision('read_pnet_profile', { profile_url: 'https://pnet.example/in/ada' }),
      decision('scrape', { url: 'https://example.com' }),
    ],
  },
  // Waits on a profile read that never settles; a person cancels it.
  'run-cancelled-waiting': {
    maxSteps: 2,
    decisions: [decision('read_pnet_profile', { profile_url: 'https://pnet.example/in/bob' })],
  },
  'run-example-1': {
    maxSteps: 2,
    decisions: [decision('scrape', { url: 'https://example.com/about' }), finish({ title: 'CTO' })],
  },
  'run-example-2': { maxSteps: 2, decisions: [finish({ title: null })] },
};
const agentRunStatus = new Map<string, 'running' | 'completed' | 'failed' | 'cancelled'>();
const profileReadsQueued = new Map<string, () => void>();
const profileReadQueued = (runId: string) => new Promise<void>((resolve) => profileReadsQueued.set(runId, resolve));
const queuedReads = {
  researched: profileReadQueued('run-researched'),
  cancelled: profileReadQueued('run-cancelled-waiting'),
};
const endRun = (runId: string, status: 'completed' | 'failed' | 'cancelled') => {
  const now = agentRunStatus.get(runId) ?? 'running';
  if (now !== 'running') return now;
  agentRunStatus.set(runId, status);
  return status;
};
const agentRunFakes = {
  beginAgentRun: async ({ runId }: { runId: string }) => {
    agentRunStatus.set(runId, 'running');
    return { state: 'go' as const, maxSteps: agentScripts[runId]!.maxSteps, plain: false };
  },
  decideAgentStep: async ({ runId, n }: { runId: string; n: number }) => agentScripts[runId]!.decisions[n]!,
  runAgentTool: async ({ n, decision: d }: { n: number; decision: AgentDecision }): Promise<RecordedStep> => ({
    n,
    action: d.action,
    outcome: 'completed',
  }),
  queueProfileRead: async ({ runId, n }: { runId: string; n: number }): Promise<ProfileReadQueued> => {
    profileReadsQueued.get(runId)?.();
    if (runId === 'run-tool-refused')
      return { state: 'recorded', step: { n, action: 'read_pnet_profile', outcome: 'refused' } };
    return { state: 'waiting', stepId: `step-${runId}-${n}` };
  },
  recordProfileRead: async ({ n, timedOut }: { n: number; timedOut: boolean }): Promise<RecordedStep> => ({
    n,
    action: 'read_pnet_profile',
    outcome: timedOut ? 'failed' : 'completed',
  }),
  finishAgentRun: async ({ runId }: { runId: string }) => endRun(runId, 'completed'),
  failAgentRun: async ({ runId }: { runId: string }) => endRun(runId, 'failed'),
  cancelAgentRun: async ({ runId }: { runId: string }) => endRun(runId, 'cancelled'),
  scoreTrainingRun: async () => undefined,
} satisfies Partial<AgentRunActivities>;

// Training sessions: the session row lives in memory and moves by the same pure transitions the
// real activities apply under their compare-and-set; the writer is a template. The write of the
// second contact waits for `releaseSecondWrite`, so a note arrives while it is under way.
const trainingSessionId = '00000000-0000-4000-8000-000000000010';
const sampleIds = [
  '00000000-0000-4000-8000-000000000011',
  '00000000-0000-4000-8000-000000000012',
  '00000000-0000-4000-8000-000000000013',
];
const trainingSlots = [
  { slot_key: 'opener', kind: 'email' as const, prompt: 'Write a short first email.' },
  { slot_key: 'follow_up', kind: 'email' as const, prompt: 'Follow up once, briefly.' },
];
const sessions = new Map<string, SessionRow>([
  [
    trainingSessionId,
    {
      id: trainingSessionId,
      workspace_id: 'w',
      sequence_id: '00000000-0000-4000-8000-00000000001a',
      agent_id: '00000000-0000-4000-8000-00000000001b',
      base_version: 1,
      applied_version: null,
      revision: 1,
      status: 'running',
      error: '',
      note_waiting: false,
      doc: newDoc(
        sampleIds.map((id, i) => ({
          record_id: id,
          person: { name: `Person ${i + 1}` },
          label: `Person ${i + 1}`,
          fields: [],
          profile_mismatch: false,
        })),
        2,
      ),
      created_at: new Date('2026-01-01T00:00:00.000Z'),
    },
  ],
]);
let releaseSecondWrite: () => void = () => {};
const secondWrite = new Promise<void>((resolve) => (releaseSecondWrite = resolve));
let secondWriteStarted = false;
const trainingAnswer = (row: SessionRow): TrainingAnswer => ({ session: toSession(row), view: viewOf(row) });
function mutateSession(
  sessionId: string,
  expected: number | undefined,
  change: (t: Transition) => Transition,
  inside?: (row: SessionRow) => void,
): SessionRow {
  const row = sessions.get(sessionId);
  if (!row) throw ApplicationFailure.nonRetryable('Training session not found.', 'not_found');
  if (expected !== undefined && row.revision !== expected) {
    throw ApplicationFailure.nonRetryable(
      `The session is at revision ${row.revision}, not ${expected}; read it again and retry.`,
      'conflict',
    );
  }
  let next: Transition;
  try {
    next = change({ head: { status: row.status, note_waiting: row.note_waiting, error: row.error }, doc: row.doc });
  } catch (error) {
    throw error instanceof TrainingRefusal ? ApplicationFailure.nonRetryable(error.message, error.code) : error;
  }
  const written: SessionRow = { ...row, ...next.head, doc: next.doc, revision: row.revision + 1 };
  inside?.(written);
  sessions.set(sessionId, written);
  return written;
}
const templateMessage = (
  slot: (typeof trainingSlots)[number],
  i: number,
  recordId: string,
  label: string,
): TrainingMessage => ({
  id: `00000000-0000-4000-8000-0000000001${String(sampleIds.indexOf(recordId) + 1)}${i}`,
  kind: slot.kind,
  title: slot.slot_key,
  timing: i === 0 ? 'first message' : `follow-up ${i}`,
  subject: i === 0 ? 'Hello' : null,
  body: `Hi ${label}, ${slot.prompt}`,
  authored: true,
  conditional: false,
  edited_body: null,
  edited_subject: null,
  error: null,
  facts_used: [],
  note: null,
  previous_body: null,
  previous_subject: null,
  reasoning: 'From the research brief.',
  reply_to_step_id: null,
  steps: [],
  proposed_body: null,
  proposed_error: null,
  proposed_subject: null,
  send: { alone: true, reason: null, doubt: null },
  proposed_send: null,
  model_key: 'local-template-writer',
});
const trainingStep = (action: string, detail: string) => ({
  action,
  detail,
  duration_ms: 5,
  observation: '2 of 2 messages written by the local template writer.',
  outcome: 'completed',
  thought: '',
});
const trainingFakes = {
  beginTrainingSession: async ({ sessionId }: { sessionId: string }) => {
    const row = sessions.get(sessionId)!;
    const ids = (states: string[]) => row.doc.contacts.filter((c) => states.includes(c.state)).map((c) => c.record_id);
    return {
      ...trainingAnswer(row),
      toWrite: ids(['waiting_write', 'writing']),
      toRewrite: ids(['rewrite_queued', 'rewriting']),
    };
  },
  writeTrainingContact: async ({ sessionId, recordId }: { sessionId: string; recordId: string }) => {
    const begun = mutateSession(sessionId, undefined, (t) => {
      if (!liveStatuses.includes(t.head.status)) throw new TrainingRefusal(`The session is ${t.head.status}.`);
      return beginWrite(t, recordId);
    });
    const contact = begun.doc.contacts.find((c) => c.record_id === recordId)!;
    const rewrite = contact.state === 'rewriting' && contact.messages.length > 0;
    if (recordId === sampleIds[1] && !rewrite) {
      secondWriteStarted = true;
      await secondWrite;
    }
    const landed = mutateSession(sessionId, undefined, (t) => {
      if (!rewrite) {
        const messages = trainingSlots.map((slot, i) => templateMessage(slot, i, recordId, contact.label));
        return landFirstWrite(
          t,
          recordId,
          messages,
          { research_brief: [], sources: [] },
          trainingStep('write_messages', contact.label),
        );
      }
      const rewrites: Parameters<typeof landRewrite>[2] = new Map(
        contact.messages.map((m) => [
          m.id,
          {
            subject: m.subject,
            body: `${m.body} (rewritten)`,
            error: null,
            send: m.send,
            reasoning: 'From the note.',
            facts_used: [],
          },
        ]),
      );
      return landRewrite(t, recordId, rewrites, trainingStep('rewrite_messages', contact.label));
    });
    return trainingAnswer(landed);
  },
  recordTrainingError: async ({ sessionId }: { sessionId: string }) => trainingAnswer(sessions.get(sessionId)!),
  finishInitialWrites: async ({ sessionId }: { sessionId: string }) =>
    trainingAnswer(
      mutateSession(sessionId, undefined, (t) =>
        t.head.status === 'running' ? moveTo(t, ['running'], 'reviewing', 'start reviewing') : t,
      ),
    ),
  recordVerdict: async (input: { sessionId: string; request: TrainingVerdict; writingOther: boolean }) =>
    trainingAnswer(
      mutateSession(input.sessionId, input.request.expected_revision, (t) =>
        giveVerdict(t, input.request, input.writingOther),
      ),
    ),
  discardTrainingChanges: async (input: { sessionId: string; expectedRevision: number }) =>
    trainingAnswer(mutateSession(input.sessionId, input.expectedRevision, discardChanges)),
  proposeTrainingUpdate: async ({ sessionId }: { sessionId: string }) => {
    let row = sessions.get(sessionId)!;
    if (row.status === 'reviewing' && readyToPropose({ head: row, doc: row.doc }))
      row = mutateSession(sessionId, undefined, (t) => moveTo(t, ['reviewing'], 'proposing', 'propose'));
    if (row.status !== 'proposing') return trainingAnswer(row);
    const proposal = draftProposal(
      { head: row, doc: row.doc },
      trainingSlots,
      row.revision,
      '00000000-0000-4000-8000-00000000001c',
    );
    return trainingAnswer(
      mutateSession(sessionId, undefined, (t) =>
        withProposal(t, proposal, trainingStep('propose_update', proposal.summary)),
      ),
    );
  },
  applyTrainingProposal: async (input: { sessionId: string; expectedRevision: number }) =>
    trainingAnswer(
      mutateSession(
        input.sessionId,
        input.expectedRevision,
        (t) => moveTo(t, ['proposed'], 'completed', 'apply a proposal'),
        (row) => (row.applied_version = 2),
      ),
    ),
  abandonTrainingSession: async (input: { sessionId: string; expectedRevision: number }) =>
    trainingAnswer(
      mutateSession(input.sessionId, input.expectedRevision, (t) =>
        moveTo(t, ['proposed'], 'abandoned', 'abandon a proposal'),
      ),
    ),
  closeTrainingSession: async (input: { sessionId: string; expectedRevision?: number }) =>
    trainingAnswer(
      mutateSession(input.sessionId, input.expectedRevision, (t) => moveTo(t, liveStatuses, 'abandoned', 'be closed')),
    ),
} satisfies Partial<TrainingActivities>;

// Mailbox polls, in order: more waiting (read again at once), then read up; the third poll ends the
// run (continue-as-new); the next run reads once, is asked to read now, and finds the mailbox off.
const mailboxAnswers: MailboxPollResult['state'][] = ['polled', 'polled', 'failed', 'polled', 'disabled'];
let mailboxPolls = 0;
const mailboxFakes = {
  pollMailbox: async (): Promise<MailboxPollResult> => {
    const state = mailboxAnswers[mailboxPolls] ?? 'disabled';
    const more = mailboxPolls === 0;
    mailboxPolls += 1;
    return {
      state,
      recorded: state === 'polled' ? 2 : 0,
      more,
      pollSeconds: 60,
      uidValidity: 7,
      lastUid: 2 * mailboxPolls,
    };
  },
} satisfies Partial<InboxActivities>;
// A sequence contact on a graph `first` (email the outbound agent writes) -> wait 1 day -> `second`
// (a template email) -> wait 2 days -> end, moved as advanceSequenceContact would: a wait's end is
// computed from the workflow's `now`, and once a reply is recorded the next look stops the contact.
const contactSteps = ['first', 'wait-1', 'second', 'wait-2', 'end'] as const;
const contact = {
  step: 0,
  written: false,
  sends: new Map<string, 'approved' | 'sent'>(),
  waitUntil: null as string | null,
  replied: false,
  advances: 0,
};
let feedReads = 0;
const sequenceFakes = {
  advanceSequenceContact: async ({ now }: { contactId: string; now: string }): Promise<ContactAction> => {
    contact.advances += 1;
    if (contact.replied) return { kind: 'done', status: 'stopped', reason: 'replied' };
    const step = contactSteps[contact.step]!;
    const moveOn = (): ContactAction => {
      contact.step += 1;
      contact.waitUntil = null;
      return { kind: 'next' };
    };
    if (step === 'end') return { kind: 'done', status: 'completed', reason: null };
    if (step.startsWith('wait')) {
      contact.waitUntil ??= new Date(Date.parse(now) + (step === 'wait-1' ? 1 : 2) * 86_400_000).toISOString();
      return Date.parse(contact.waitUntil) <= Date.parse(now)
        ? moveOn()
        : { kind: 'wait', reason: 'timer', until: contact.waitUntil };
    }
    const send = contact.sends.get(step);
    if (send === 'sent') return moveOn();
    if (send === 'approved') return { kind: 'send_email', sendId: `send-${step}` };
    if (step === 'first') {
      return {
        kind: 'write',
        stepId: step,
        version: 1,
        input: {
          workspaceId: 'w',
          agentId: 'agent-1',
          sequenceId: 'sequence-1',
          contactKey: 'email:ada@example.com',
          slotKey: 'opener',
          kind: 'email',
          contact: { name: 'Ada', email: 'ada@example.com', fields: {} },
        },
      };
    }
    contact.sends.set(step, 'approved'); // the template's message, approved (automatic mode)
    return { kind: 'next' };
  },
  writeStepMessage: async (): Promise<WriteStepMessageResult> => ({
    messageId: 'message-1',
    subject: 'Hello Ada',
    body: 'Hi Ada, …',
    needsReview: false,
    reason: null,
  }),
  recordWrittenMessage: async ({ stepId }: { stepId: string }) => void contact.sends.set(stepId, 'approved'),
  sendSequenceEmail: async ({ sendId }: { sendId: string }) => {
    contact.sends.set(sendId.replace(/^send-/, ''), 'sent');
    return { outcome: 'sent' as const, reason: null };
  },
  // The feed: a full batch (read again at once), the rest, then feeding switched off.
  feedSequence: async () => {
    feedReads += 1;
    return (
      [
        { feeding: true, enrolled: 500, more: true },
        { feeding: true, enrolled: 3, more: false },
      ][feedReads - 1] ?? { feeding: false, enrolled: 0, more: false }
    );
  },
} satisfies Partial<SequenceActivities & OutboundAgentActivities & MailerActivities>;
// An assistant turn: the model calls two tools (one card waits for a person, one runs under a
// grant), then answers in words; the person's approval starts a column run the turn watches.
const turnChecks = { n: 0 };
const assistantTurnActivities = {
  answerStep: async ({ step }: { step: number }) =>
    step === 0
      ? {
          text: '',
          toolCalls: [
            { id: 'call-1', name: 'run_column', arguments: '{}' },
            { id: 'call-2', name: 'add_column', arguments: '{}' },
          ],
          promptTokens: 1,
          completionTokens: 1,
        }
      : { text: 'Two cards.', toolCalls: [], promptTokens: 1, completionTokens: 1 },
  proposeCard: async ({ call }: { call: { id: string } }) =>
    call.id === 'call-1'
      ? { cardId: 'card-1', autoRun: false, toolResult: 'Card card-1 proposed.' }
      : { cardId: 'card-2', autoRun: true, toolResult: 'Card card-2 proposed.' },
  finishAnswer: async () => {},
  decideCard: async ({ cardId }: { cardId: string }) =>
    cardId === 'card-1'
      ? { cardId, won: true, status: 'applying' as const, waiting: true }
      : { cardId, won: true, status: 'applied' as const, waiting: false },
  checkCardRun: async () =>
    (turnChecks.n += 1) >= 2
      ? { done: true, status: 'applied' as const }
      : { done: false, status: 'applying' as const },
  expireCards: async () => [],
} satisfies Partial<AssistantTurnActivities & CardActivities>;
// Chat attachments: one file read (three pages); one refused as unreadable, recorded `failed`.
const chatAttachmentFakes = {
  extractChatAttachment: async ({ attachmentId }: { attachmentId: string }) => {
    if (attachmentId === 'attachment-refused') {
      throw ApplicationFailure.nonRetryable(
        'The PDF is password-protected (encrypted); save it without a password and upload it again.',
        'unprocessable',
      );
    }
    return { status: 'ready' as const, pageCount: 3 };
  },
  failChatAttachment: async () => undefined,
} satisfies Partial<ChatAttachmentActivities>;
// Business-context documents: one read, chunked and summarised; one refused as unreadable, recorded `failed`.
const documentStep = (name: string, detail: string | null) => ({
  name,
  detail,
  started_at: '2026-01-01T00:00:00.000Z',
  finished_at: '2026-01-01T00:00:00.010Z',
  duration_ms: 10,
});
const documentFakes = {
  beginDocumentRun: async () => true,
  readDocumentText: async ({ documentId }: { documentId: string; run: number }) => {
    if (documentId === 'document-refused') {
      throw ApplicationFailure.nonRetryable(
        'The PDF could not be read: The PDF is damaged or truncated and cannot be read. Upload an undamaged copy without a password.',
        'unprocessable',
      );
    }
    return {
      continue: true,
      steps: [
        documentStep('extract', 'plain text, 200 characters'),
        documentStep('chunk', '1 chunk of at most 8,000 characters'),
      ],
    };
  },
  summariseDocument: async () => ({
    ready: true,
    steps: [documentStep('summarise', 'local extractive summary (no chat model configured)')],
  }),
  failDocumentRun: async ({ error }: { error: string }) => ({ steps: [documentStep('failed', error)] }),
} satisfies Partial<DocumentActivities>;
// A lead search: a page, a 429 waited out, the last page.
const leadProgress = (status: string, pages: number, rows: number) => ({
  status,
  pages_read: pages,
  rows_landed: rows,
  duplicates: 0,
  credits_charged: rows,
  rate_limited: 0,
  total_available: 8,
});
let leadCalls = 0;
const leadSearchFakes = {
  beginLeadSearchRun: async () => ({ nextPage: 1, progress: leadProgress('running', 0, 0) }),
  leadSearchPage: async ({ page }: { page: number }) => {
    leadCalls += 1;
    if (leadCalls === 2) return { kind: 'rate_limited' as const, waitSeconds: 1 };
    return page === 1
      ? { kind: 'landed' as const, nextPage: 2, progress: leadProgress('running', 1, 4) }
      : { kind: 'ended' as const, progress: leadProgress('succeeded', 2, 8) };
  },
  endLeadSearch: async () => undefined,
} satisfies Partial<LeadSearchActivities>;
// An import run of two chunks, and a write-back of one.
let importChunks = 0;
const importFakes = {
  beginImportRun: async () => true,
  importChunk: async () => ({ done: (importChunks += 1) % 2 === 0, read: 100 }),
  endImportRun: async () => undefined,
  writeBackChunkActivity: async () => ({ done: true, progress: '3 written, 0 unchanged, 2 failed' }),
  endWriteBack: async () => undefined,
} satisfies Partial<CrmActivities>;
const subdomainFakes = {
  subdomainChunk: async () => ({ done: true, progress: '1/1 domains, 3 live subdomains' }),
  endSubdomainDiscovery: async () => undefined,
} satisfies Partial<SubdomainActivities>;
// A batch of two events: both planned and first attempted in one activity; one webhook refused (503) is retried after 5 s and then delivered; a replay's first attempt delivers.
const notificationFakes = {
  deliverNotificationBatch: async () => ({
    deliveries: 4,
    succeeded: 3,
    failed: [{ id: 'd-webhook', run: 1, result: { kind: 'failed' as const, statusCode: 503 } }],
  }),
  attemptNotificationDeliveries: async ({ deliveries }: { deliveries: { id: string; run: number }[] }) =>
    deliveries.map((d) => ({ ...d, result: { kind: 'succeeded' as const, statusCode: 200 } })),
  sendNotificationDigests: async () => 2,
} satisfies Partial<NotificationActivities>;
// Billing: two settlements a month apart (a grant each), a signal, then the workspace is gone.
// Counted by the settlement's time, not by calls: an attempt retried under load (it happened once)
// is the same settlement, and counting it closed the workflow before the signal reached it.
const billingSettles = new Set<string>();
const billingFakes = {
  settleBilling: async ({ now }: { workspaceId: string; now: string }) => {
    billingSettles.add(now);
    const closed = billingSettles.size >= 3;
    return {
      closed,
      plan: closed ? null : ('free' as const),
      periodStart: closed ? null : now,
      nextWakeAt: closed ? null : new Date(Date.parse(now) + 31 * 86_400_000).toISOString(),
      granted: closed ? 0 : 100,
      downgraded: false,
    };
  },
} satisfies Partial<BillingActivities>;
// The payout cycle: earlier payouts read back, two pages of affiliates, one batch sent, its items pending once, then settled.
const payoutFollows = { n: 0 };
const payoutFakes = {
  affiliatePayoutProviderMissing: async () => [],
  followAffiliatePayouts: async () => {
    payoutFollows.n += 1;
    return { batches: 1, moved: payoutFollows.n === 1 ? 0 : 1, stillOpen: payoutFollows.n === 2 ? 1 : 0 };
  },
  forfeitAffiliateBalances: async () => 0,
  prepareAffiliatePayouts: async ({ after }: { cycleAt: string; after: string | null; limit: number }) =>
    after ? { next: null, created: 1, skipped: 0 } : { next: 'a-200', created: 2, skipped: 198 },
  sendAffiliatePayoutBatch: (() => {
    let sent = 0;
    return async () =>
      sent++ === 0
        ? { done: false, batchId: 'b-1', sent: 3, failed: 0, requeued: 0 }
        : { done: true, batchId: null, sent: 0, failed: 0, requeued: 0 };
  })(),
} satisfies Partial<AffiliatePayoutActivities>;
// A maturation shard: a commission held 30 days, a signal for one made due in 2 days (its wake),
// that one matured at its time, and the run (3 looks) continues as new; the next run matures the
// first at day 30 and ends with nothing held.
const maturationLooks = { n: 0, start: 0 };
const maturationFakes = {
  matureDueCommissions: async ({ now }: { shard: number; now: string }) => {
    maturationLooks.n += 1;
    if (maturationLooks.n === 1) maturationLooks.start = Date.parse(now);
    const at = (days: number) => new Date(maturationLooks.start + days * 86_400_000).toISOString();
    const looks = [
      { matured: 0, nextAt: at(30) },
      { matured: 0, nextAt: at(2) },
      { matured: 1, nextAt: at(30) },
    ];
    return looks[maturationLooks.n - 1] ?? { matured: 1, nextAt: null };
  },
} satisfies Partial<CommissionMaturationActivities>;
// The activities answer as the real ones would, without a database.
const worker = await Worker.create({
  connection: env.nativeConnection,
  taskQueue,
  workflowsPath,
  activities: {
    ...assistantTurnActivities,
    ...chatAttachmentFakes,
    ...documentFakes,
    ...leadSearchFakes,
    ...importFakes,
    ...subdomainFakes,
    ...notificationFakes,
    ...billingFakes,
    ...payoutFakes,
    ...maturationFakes,
    releaseExpiredHold: async () => 'released',
    approveStep: async () => ({ step: { status: 'queued' } }),
    rejectStep: async () => ({ step: { status: 'rejected' } }),
    cancelStep: async () => ({ step: { status: 'failed' } }),
    readStepChange: async ({ stepId }: { stepId: string }) => {
      const status = stepChanges.get(stepId)!.shift()!;
      const claimedAt = status === 'claimed' ? new Date(await env.currentTimeMs()).toISOString() : null;
      return { status, claimedAt, errorCode: null, wakes: status === 'succeeded' };
    },
    resendStepSignals: async () => 0,
    // The renewed step's first look finds a check-in since: its lease runs a minute more.
    expireClaim: async ({ stepId, now }: { stepId: string; now: string }) => {
      const looks = (claims.get(stepId) ?? 0) + 1;
      claims.set(stepId, looks);
      if (stepId === renewedStepId && looks === 1)
        return { status: 'claimed', leaseUntil: new Date(Date.parse(now) + 60_000).toISOString() };
      return { status: 'queued', errorCode: 'claim_expired' };
    },
    missWindow: async () => ({ status: 'failed', errorCode: 'missed_window' }),
    retryStep: async () => ({ step: { status: 'resuming' } }),
    tickSenderAccount: async () => ({ connected: true, checkpointUntil: null, nextCheckAt: null, queuedStepIds: [] }),
    beginColumnRun: async () => ({
      state: 'running',
      status: 'queued',
      provider: 'web_page_reader',
      concurrency: 2,
      timeoutSeconds: 15,
    }),
    claimRunBatch: async ({ runId }: { runId: string }) => {
      const n = (claims.get(runId) ?? 0) + 1;
      claims.set(runId, n);
      const rowIds =
        runId === 'run-cancelled' ? ['row-slow-1', 'row-slow-2', 'row-4', 'row-5'] : ['row-1', 'row-2', 'row-3'];
      return n === 1
        ? { rowIds, exhausted: false, wakes: 0, progress: 0, stop: null }
        : { rowIds: [], exhausted: true, wakes: 1, progress: 100, stop: null };
    },
    runEnrichmentCell: async ({ rowId }: { rowId: string }) => {
      if (rowId === 'row-2') throw ApplicationFailure.nonRetryable('127.0.0.1 answered 404.', 'provider_refused');
      if (rowId.startsWith('row-slow')) {
        slowStarted += 1;
        await slowRows;
      }
      return rowId === 'row-3' ? 'empty' : 'done';
    },
    failEnrichmentCell: async () => undefined,
    finishColumnRun: async ({ outcome }: { outcome: string }) => ({ finished: true, status: outcome }),
    ...agentRunFakes,
    ...trainingFakes,
    ...mailboxFakes,
    ...sequenceFakes,
  },
});
const expiresAt = new Date(Date.now() + 24 * 3600 * 1000).toISOString();
// The time-skipping server is stopped however the recording ends (a failure once left it running).
try {
  await worker.runUntil(async () => {
    const expired = await env.client.workflow.start(creditHoldWorkflow, {
      taskQueue,
      workflowId: creditHoldWorkflowId('expired'),
      args: [{ holdId: '00000000-0000-4000-8000-000000000001', workspaceId: 'w', expiresAt }],
    });
    await expired.result();
    const settled = await env.client.workflow.start(creditHoldWorkflow, {
      taskQueue,
      workflowId: creditHoldWorkflowId('settled'),
      args: [{ holdId: '00000000-0000-4000-8000-000000000002', workspaceId: 'w', expiresAt }],
    });
    await settled.signal(creditHoldSettledSignal, { outcome: 'charged' });
    await settled.result();
    const step = await env.client.workflow.start(browserStepWorkflow, {
      taskQueue,
      workflowId: browserStepWorkflowId('approved-then-cancelled'),
      args: [
        {
          stepId: '00000000-0000-4000-8000-000000000003',
          workspaceId: 'w',
          accountId: 'a',
          kind: 'profile_view',
          status: 'awaiting_approval',
        },
      ],
    });
    await step.executeUpdate(approveStepUpdate);
    await step.executeUpdate(cancelStepUpdate, { args: [{ errorCode: 'cancelled' }] });
    await step.result();
    stepChanges.set('00000000-0000-4000-8000-000000000004', ['claimed', 'claimed', 'succeeded']);
    stepChanges.set(renewedStepId, ['claimed', 'claimed', 'succeeded']);
    const claimed = await env.client.workflow.start(browserStepWorkflow, {
      taskQueue,
      workflowId: browserStepWorkflowId('claimed-lapsed-then-settled'),
      args: [
        {
          stepId: '00000000-0000-4000-8000-000000000004',
          workspaceId: 'w',
          accountId: 'a',
          kind: 'check_inbox',
          status: 'queued',
        },
      ],
    });
    // The API commits a claim, then a result, and signals each; the workflow reads the row.
    const changed = async (handle: typeof claimed, status: StoredStepStatus) => {
      await handle.signal(stepChangedSignal);
      while ((await handle.query(browserStepStateQuery)).status !== status) await new Promise((r) => setTimeout(r, 20));
    };
    await changed(claimed, 'claimed');
    await env.sleep('200 seconds'); // no check-in for a whole lease: the read goes back in line
    await changed(claimed, 'claimed');
    await claimed.signal(stepChangedSignal);
    await claimed.result();
    const renewed = await env.client.workflow.start(browserStepWorkflow, {
      taskQueue,
      workflowId: browserStepWorkflowId('lease-renewed-lapsed-then-settled'),
      args: [{ stepId: renewedStepId, workspaceId: 'w', accountId: 'a', kind: 'check_inbox', status: 'queued' }],
    });
    await changed(renewed, 'claimed');
    await env.sleep('200 seconds'); // renewed once in SQL, then silent: the read goes back in line
    await changed(renewed, 'claimed');
    await renewed.signal(stepChangedSignal);
    await renewed.result();
    // The sweeper: a few turns with nothing to send again, still running when recorded.
    // Its history is read now and the run ended: left running, its turns would fill the rest of the recording's skipped days.
    const sweeping = await env.client.workflow.start(stepSignalSweeperWorkflow, {
      taskQueue,
      workflowId: stepSignalSweeperWorkflowId(taskQueue),
      args: [{ graceSeconds: 5, everySeconds: 5 }],
    });
    await env.sleep('16 seconds');
    const sweeperHistory = await sweeping.fetchHistory();
    await sweeping.terminate();
    const sweeper = { fetchHistory: async () => sweeperHistory };
    // A retried failure: the step's run closes when it fails, and the retry starts the next run.
    const failed = await env.client.workflow.start(browserStepWorkflow, {
      taskQueue,
      workflowId: browserStepWorkflowId('retried'),
      args: [
        {
          stepId: '00000000-0000-4000-8000-000000000005',
          workspaceId: 'w',
          accountId: 'a',
          kind: 'send_message',
          status: 'failed',
        },
      ],
    });
    await failed.executeUpdate(retryStepUpdate);
    await failed.executeUpdate(cancelStepUpdate, { args: [{ errorCode: 'cancelled' }] });
    await failed.result();
    // A queued step nobody claims before its deadline fails with missed_window.
    const missed = await env.client.workflow.start(browserStepWorkflow, {
      taskQueue,
      workflowId: browserStepWorkflowId('missed-window'),
      args: [
        {
          stepId: '00000000-0000-4000-8000-000000000007',
          workspaceId: 'w',
          accountId: 'a',
          kind: 'profile_view',
          status: 'queued',
          runBefore: new Date((await env.currentTimeMs()) + 3_600_000).toISOString(),
        },
      ],
    });
    await missed.result();
    // An account's clock: ticks on its timer and on a signal, still running when recorded.
    const account = await env.client.workflow.start(senderAccountWorkflow, {
      taskQueue,
      workflowId: senderAccountWorkflowId('ticking'),
      args: [{ accountId: '00000000-0000-4000-8000-000000000006', workspaceId: 'w' }],
    });
    await env.sleep('40 minutes');
    await account.signal(accountChangedSignal);
    await env.sleep('1 minute');
    const columnRun = await env.client.workflow.start(columnRunWorkflow, {
      taskQueue,
      workflowId: columnRunWorkflowId('completed'),
      args: [{ runId: 'run-completed', workspaceId: 'w', tableId: 't', columnId: 'c' }],
    });
    await columnRun.signal(rowsAddedSignal);
    await columnRun.result();
    const cancelledRun = await env.client.workflow.start(columnRunWorkflow, {
      taskQueue,
      workflowId: columnRunWorkflowId('cancelled'),
      args: [{ runId: 'run-cancelled', workspaceId: 'w', tableId: 't', columnId: 'c' }],
    });
    while (slowStarted < 2) await new Promise((resolve) => setTimeout(resolve, 50));
    await cancelledRun.signal(cancelColumnRunSignal);
    releaseSlowRows();
    await cancelledRun.result();
    // Agent runs: researched and finished (a profile read woken by its settling signal); a refused
    // tool and the step bound failing the run; a run cancelled while it waits on a profile read.
    const researched = await env.client.workflow.start(agentRunWorkflow, {
      taskQueue,
      workflowId: agentCellRunWorkflowId('column-1', 'row-1', 'run-researched'),
      args: [{ runId: 'run-researched', workspaceId: 'w' }],
    });
    await queuedReads.researched;
    await researched.signal(pnetStepSettledSignal, { stepId: 'step-run-researched-2' });
    await researched.result();
    const refusedTool = await env.client.workflow.start(agentRunWorkflow, {
      taskQueue,
      workflowId: agentCellRunWorkflowId('column-1', 'row-2', 'run-tool-refused'),
      args: [{ runId: 'run-tool-refused', workspaceId: 'w' }],
    });
    await refusedTool.result();
    const cancelledAgent = await env.client.workflow.start(agentRunWorkflow, {
      taskQueue,
      workflowId: agentCellRunWorkflowId('column-1', 'row-3', 'run-cancelled-waiting'),
      args: [{ runId: 'run-cancelled-waiting', workspaceId: 'w' }],
    });
    await queuedReads.cancelled;
    await cancelledAgent.executeUpdate(cancelAgentRunUpdate);
    await cancelledAgent.result();
    const agentTraining = await env.client.workflow.start(agentTrainingWorkflow, {
      taskQueue,
      workflowId: agentTrainingWorkflowId('training-1'),
      args: [
        {
          trainingRunId: 'training-1',
          workspaceId: 'w',
          runs: ['run-example-1', 'run-example-2'].map((runId, i) => ({
            runId,
            workflowId: agentExampleRunWorkflowId('training-1', `example-${i + 1}`),
          })),
        },
      ],
    });
    await agentTraining.result();

    // A training session: a note on the first contact while the second is being written (its rewrite
    // comes before the third write), the rewrite discarded, a note and a kept rewrite on the second,
    // Looks good twice, the proposal drafted and applied.
    const training = await env.client.workflow.start(trainingSessionWorkflow, {
      taskQueue,
      workflowId: trainingSessionWorkflowId(trainingSessionId),
      args: [{ sessionId: trainingSessionId, workspaceId: 'w', sequenceId: '00000000-0000-4000-8000-00000000001a' }],
    });
    const trainingState = () => training.query(trainingStateQuery);
    const until = async (done: (s: TrainingWorkflowState) => boolean) => {
      while (!done(await trainingState())) await new Promise((resolve) => setTimeout(resolve, 50));
    };
    const [first, second] = sampleIds as [string, string, string];
    while (!secondWriteStarted) await new Promise((resolve) => setTimeout(resolve, 50));
    await training.executeUpdate(giveVerdictUpdate, {
      args: [{ record_id: first, verdict: 'note', note: 'Shorter, please.' }],
    });
    releaseSecondWrite();
    await until((s) => s.view?.status === 'reviewing');
    const afterDiscard = await training.executeUpdate(discardChangesUpdate, {
      args: [{ expectedRevision: (await trainingState()).view!.revision }],
    });
    await training.executeUpdate(giveVerdictUpdate, {
      args: [
        { record_id: second, verdict: 'note', note: 'Mention the event.', expected_revision: afterDiscard.revision },
      ],
    });
    await until((s) => s.view?.contacts[second] === 'awaiting_verdict' && s.writing === null);
    await training.executeUpdate(giveVerdictUpdate, { args: [{ record_id: second, verdict: 'looks_good' }] });
    await training.executeUpdate(giveVerdictUpdate, { args: [{ record_id: first, verdict: 'looks_good' }] });
    await until((s) => s.view?.status === 'proposed');
    await training.executeUpdate(applyProposalUpdate, {
      args: [{ expectedRevision: (await trainingState()).view!.revision }],
    });
    await training.result();

    // A mailbox: polls until the run's bound (an interval between), continues as new, then stops.
    const mailbox = await env.client.workflow.start(mailboxPollWorkflow, {
      taskQueue,
      workflowId: mailboxPollWorkflowId('00000000-0000-4000-8000-000000000020'),
      args: [{ mailboxId: '00000000-0000-4000-8000-000000000020', workspaceId: 'w', pollsPerRun: 3 }],
    });
    const mailboxState = () => env.client.workflow.getHandle(mailbox.workflowId).query(mailboxPollStateQuery);
    while ((await mailboxState().catch(() => null))?.waiting !== 'interval')
      await new Promise((resolve) => setTimeout(resolve, 50));
    await env.sleep('61 seconds'); // the interval passes: the third poll ends the run
    while (mailboxPolls < 4 || (await mailboxState().catch(() => null))?.waiting !== 'interval')
      await new Promise((resolve) => setTimeout(resolve, 50));
    await env.client.workflow.getHandle(mailbox.workflowId).signal(pollMailboxNowSignal);
    await mailbox.result();
    const mailboxFirstRun = env.client.workflow.getHandle(mailbox.workflowId, mailbox.firstExecutionRunId);

    // A sequence contact: the agent writes the first email, it is sent, a day's wait passes, the
    // second email goes, and a reply during the next wait stops the contact (the wake signal).
    const sequenceContact = await env.client.workflow.start(sequenceContactWorkflow, {
      taskQueue,
      workflowId: sequenceContactWorkflowId('sequence-1', 'contact-1'),
      args: [{ contactId: 'contact-1', sequenceId: 'sequence-1', workspaceId: 'w' }],
    });
    const contactPhase = async () => (await sequenceContact.query(sequenceContactStateQuery)).phase;
    const waitingAt = async (step: (typeof contactSteps)[number]) =>
      contactSteps[contact.step] === step && (await contactPhase()) === 'waiting';
    while (!(await waitingAt('wait-1'))) await new Promise((resolve) => setTimeout(resolve, 50));
    await env.sleep('25 hours'); // the day's wait ends
    while (!(await waitingAt('wait-2'))) await new Promise((resolve) => setTimeout(resolve, 50));
    contact.replied = true; // the inbox recorded a reply, and wakes the contact
    await sequenceContact.signal(wakeContactSignal);
    await sequenceContact.result();
    const sequenceFeed = await env.client.workflow.start(sequenceFeedWorkflow, {
      taskQueue,
      workflowId: sequenceFeedWorkflowId('sequence-1'),
      args: [{ sequenceId: 'sequence-1', pollSeconds: 30 }],
    });
    await sequenceFeed.result(); // the poll interval passes (time skips), and the third read finds feeding off

    const turn = await env.client.workflow.start(assistantTurnWorkflow, {
      taskQueue,
      workflowId: assistantTurnWorkflowId('message-1'),
      args: [{ messageId: 'message-1', workspaceId: 'w', conversationId: 'conversation-1' }],
    });
    while (
      !Object.keys((await turn.query(assistantTurnQuery).catch(() => null))?.cards ?? {}).includes('card-2') ||
      (await turn.query(assistantTurnQuery)).answering
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await turn.executeUpdate(decideCardsUpdate, {
      args: [
        {
          cardIds: ['card-1'],
          decision: 'approved',
          scope: 'once',
          key: 'request-1',
          actor: { kind: 'user', memberId: 'member-1', displayName: 'Ada' },
        },
      ],
      updateId: 'approve-card-1',
    });
    await turn.result(); // the run is checked twice (time skips the waits), then every card is done
    // A connected app's card (decision 040): raised outside the model, the turn asks none and waits for its decision.
    const appTurn = await env.client.workflow.start(assistantTurnWorkflow, {
      taskQueue,
      workflowId: assistantTurnWorkflowId('message-app'),
      args: [
        { messageId: 'message-app', workspaceId: 'w', conversationId: 'conversation-app', raisedCards: ['card-app'] },
      ],
    });
    while ((await appTurn.query(assistantTurnQuery).catch(() => null))?.answering !== false)
      await new Promise((resolve) => setTimeout(resolve, 50));
    await appTurn.executeUpdate(decideCardsUpdate, {
      args: [
        {
          cardIds: ['card-app'],
          decision: 'approved',
          scope: 'once',
          key: 'request-app',
          actor: { kind: 'user', memberId: 'member-1', displayName: 'Ada' },
        },
      ],
      updateId: 'approve-card-app',
    });
    await appTurn.result();

    // A chat attachment read, and one refused: the refusal is recorded and answered, not a failed workflow.
    const attachmentRead = await env.client.workflow.start(chatAttachmentWorkflow, {
      taskQueue,
      workflowId: chatAttachmentWorkflowId('attachment-read'),
      args: [{ attachmentId: 'attachment-read', workspaceId: 'w' }],
    });
    await attachmentRead.result();
    const attachmentRefused = await env.client.workflow.start(chatAttachmentWorkflow, {
      taskQueue,
      workflowId: chatAttachmentWorkflowId('attachment-refused'),
      args: [{ attachmentId: 'attachment-refused', workspaceId: 'w' }],
    });
    await attachmentRefused.result();
    const documentRead = await env.client.workflow.start(documentWorkflow, {
      taskQueue,
      workflowId: documentWorkflowId('document-read'),
      args: [{ documentId: 'document-read', workspaceId: 'w', run: 1 }],
    });
    await documentRead.result();
    const documentRefused = await env.client.workflow.start(documentWorkflow, {
      taskQueue,
      workflowId: documentWorkflowId('document-refused'),
      args: [{ documentId: 'document-refused', workspaceId: 'w', run: 1 }],
    });
    await documentRefused.result();
    const leadSearch = await env.client.workflow.start(leadSearchWorkflow, {
      taskQueue,
      workflowId: 'lead-search/recorded',
      args: [{ searchId: 'recorded', workspaceId: 'w' }],
    });
    await leadSearch.result();
    const importRun = await env.client.workflow.start(importRunWorkflow, {
      taskQueue,
      workflowId: 'import-run/recorded/run-1',
      args: [{ importId: 'recorded', workspaceId: 'w', trigger: 'manual', runId: 'run-1' }],
    });
    await importRun.result();
    const writeBack = await env.client.workflow.start(writeBackWorkflow, {
      taskQueue,
      workflowId: 'write-back/recorded',
      args: [{ writeBackId: 'recorded', workspaceId: 'w' }],
    });
    await writeBack.result();
    const subdomains = await env.client.workflow.start(subdomainDiscoveryWorkflow, {
      taskQueue,
      workflowId: 'subdomain-discovery/recorded',
      args: [{ discoveryId: 'recorded', workspaceId: 'w' }],
    });
    await subdomains.result();
    const notificationBatch = await env.client.workflow.start(notificationBatchWorkflow, {
      taskQueue,
      workflowId: notificationBatchWorkflowId('recorded-1'),
      args: [{ eventIds: ['recorded-1', 'recorded-2'] }],
    });
    await notificationBatch.result();
    const notificationReplay = await env.client.workflow.start(notificationReplayWorkflow, {
      taskQueue,
      workflowId: notificationReplayWorkflowId('d-chat', 2),
      args: [{ deliveryId: 'd-chat', run: 2 }],
    });
    await notificationReplay.result();
    const notificationDigest = await env.client.workflow.start(notificationDigestWorkflow, {
      taskQueue,
      workflowId: 'notification-digest-recorded',
      args: [],
    });
    await notificationDigest.result();

    const billing = await env.client.workflow.start(workspaceBillingWorkflow, {
      taskQueue,
      workflowId: workspaceBillingWorkflowId('recorded'),
      args: [{ workspaceId: 'w' }],
    });
    await env.sleep('32 days');
    await billing.signal(billingChangedSignal);
    await billing.result();
    const maturation = await env.client.workflow.start(commissionMaturationWorkflow, {
      taskQueue,
      workflowId: commissionMaturationWorkflowId(taskQueue, 3),
      args: [{ shard: 3, loopsPerRun: 3 }],
    });
    await env.sleep('1 hour');
    await maturation.signal(maturationWakeSignal, { reason: 'created' });
    await maturation.result();
    const maturationFirstRun = env.client.workflow.getHandle(maturation.workflowId, maturation.firstExecutionRunId);
    const payoutCycle = await env.client.workflow.start(affiliatePayoutCycleWorkflow, {
      taskQueue,
      workflowId: payoutCycleWorkflowId(taskQueue, '2026-12'),
      args: [{ cycleAt: '2026-12-01T00:00:00.000Z' }],
    });
    await payoutCycle.result();
    const histories = [
      ['credit-hold-expired', expired],
      ['credit-hold-settled', settled],
      ['browser-step-approved-then-cancelled', step],
      ['browser-step-claimed-lapsed-then-settled', claimed],
      ['browser-step-lease-renewed-lapsed-then-settled', renewed],
      ['browser-step-retried-then-cancelled', failed],
      ['browser-step-missed-window', missed],
      ['sender-account-ticking', account],
      ['column-run-completed-with-failure', columnRun],
      ['column-run-cancelled', cancelledRun],
      ['agent-run-researched-then-finished', researched],
      ['agent-run-tool-refused-then-failed', refusedTool],
      ['agent-run-cancelled-while-waiting', cancelledAgent],
      ['agent-training-two-examples', agentTraining],
      ['training-session-note-discard-apply', training],
      ['mailbox-poll-continued-as-new', mailboxFirstRun],
      ['mailbox-poll-stopped', mailbox],
      ['sequence-contact-sent-waited-replied', sequenceContact],
      ['sequence-feed-batches-then-off', sequenceFeed],
      ['assistant-turn-two-cards-one-approved', turn],
      ['assistant-turn-connected-app-card-approved', appTurn],
      ['chat-attachment-read', attachmentRead],
      ['chat-attachment-refused-recorded', attachmentRefused],
      ['document-read-ready', documentRead],
      ['document-refused-failed', documentRefused],
      ['lead-search-paged-rate-limited', leadSearch],
      ['import-run-two-chunks', importRun],
      ['write-back-one-chunk', writeBack],
      ['subdomain-discovery-one-chunk', subdomains],
      ['notification-batch-one-retried-then-delivered', notificationBatch],
      ['notification-replay-delivered', notificationReplay],
      ['notification-digest-sent', notificationDigest],
      ['workspace-billing-granted-woken-closed', billing],
      ['step-signal-sweeper-three-turns', sweeper],
      ['affiliate-payout-cycle-paged-sent-followed', payoutCycle],
      ['commission-maturation-woken-matured-continued-as-new', maturationFirstRun],
      ['commission-maturation-matured-then-ended', maturation],
    ] as const;
    // Histories already recorded stay as they are: they are the archive that today's code must
    // still replay. Only new ones are written (or all with --force).
    for (const [name, handle] of histories) {
      const file = join(projectRoot, 'test', 'histories', `${name}.json`);
      if (existsSync(file) && !process.argv.includes('--force')) continue;
      writeFileSync(file, historyToJSON(await handle.fetchHistory()));
      console.log(`recorded ${file}`);
    }
    await account.terminate();
  });
} finally {
  await env.teardown();
}
