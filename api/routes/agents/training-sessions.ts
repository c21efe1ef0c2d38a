/**
 * Training sessions of a sequence's outbound agent (interface spec: Training session, Training
 * session status), discardTrainingChanges among them. Reads come from Postgres; every change is a
 * Workflow Update to `training-session/<session_id>` with an id derived from the request, answered
 * with the stored session.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema, ValidationBodySchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  OptionalRevisionBodySchema,
  RevisionBodySchema,
  TrainingSessionListSchema,
  TrainingSessionSchema,
  TrainingStartSchema,
  TrainingVerdictSchema,
} from '../../../domain/agents/training-session-schemas.js';
import { giveVerdictUpdate } from '../../../workflows/agents/training-session.contract.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import {
  liveTrainingSession,
  reviseTrainingSession,
  startTrainingSession,
  updateTrainingSession,
  type RevisionChange,
} from '../../../services/agents/training-client.js';
import { createSession, findSession, listSessions, toSession } from '../../../store/agents/training-sessions.js';

const tags = ['training-sessions'];
const SequenceParamsSchema = z.object({ sequence_id: UuidSchema });
const SessionParamsSchema = z.object({ sequence_id: UuidSchema, session_id: UuidSchema });

const transitions = `
Status transitions (3.2):

| From | Trigger | To |
|---|---|---|
| (new) | start | running: the agent writes each sample contact in turn |
| running | every sample written | reviewing |
| running, reviewing | Looks good / note (verdicts) | same; a note queues a rewrite (note_waiting while another write is under way) and resets in_a_row |
| running, reviewing, proposed | discard-changes | reviewing (or unchanged): the latest pending rewrite and its lesson are dropped; a proposal is withdrawn |
| reviewing | ready_after Looks good in a row, nothing queued | proposing, then proposed (the prompt update is drafted) |
| proposed | apply | completed: a new agent version (applied_version) |
| proposed | abandon | abandoned: the agent is left as it was |
| running, reviewing, proposing, proposed | close | abandoned |
| completed, abandoned | anything | unchanged (409) |

Every change bumps \`revision\`; a request carrying another \`expected_revision\` is refused with 409 and changes nothing.`;

const conflict409 = DetailBodySchema.describe(
  'The session is not in a state that allows this, or expected_revision is stale; nothing changed',
);

export const trainingSessionRoutes =
  ({ sql, temporal }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/sequences/:sequence_id/agent/training/',
      {
        schema: {
          operationId: 'startTrainingSession',
          tags,
          summary: "Start a training session of the sequence's outbound agent on the first rows of its audience table",
          description: `The session starts \`running\` and its workflow (\`training-session/<id>\`) writes each sample contact's messages.\n${transitions}`,
          params: SequenceParamsSchema,
          body: TrainingStartSchema,
          response: {
            201: TrainingSessionSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe('No agent or audience rows, or a session is already under way'),
            422: ValidationBodySchema,
          },
        },
      },
      async (request, reply) => {
        const row = await createSession(
          sql,
          principalOf(request).workspaceId,
          request.params.sequence_id,
          request.body,
        );
        await startTrainingSession(temporal, row);
        return reply.code(201).send(toSession(row));
      },
    );

    app.get(
      '/sequences/:sequence_id/agent/training/',
      {
        schema: {
          operationId: 'listTrainingSessions',
          tags,
          summary: "The sequence's training sessions, newest first",
          params: SequenceParamsSchema,
          response: { 200: TrainingSessionListSchema, 404: DetailBodySchema },
        },
      },
      async (request) => ({
        sessions: await listSessions(sql, principalOf(request).workspaceId, request.params.sequence_id),
      }),
    );

    app.get(
      '/sequences/:sequence_id/agent/training/:session_id/',
      {
        schema: {
          operationId: 'readTrainingSession',
          tags,
          summary: 'Read a training session (its status resumes the review screen)',
          description: transitions,
          params: SessionParamsSchema,
          response: { 200: TrainingSessionSchema, 404: DetailBodySchema },
        },
      },
      async (request) => {
        const row = await findSession(
          sql,
          principalOf(request).workspaceId,
          request.params.sequence_id,
          request.params.session_id,
        );
        if (!row) throw notFound('Training session');
        return toSession(row);
      },
    );

    app.post(
      '/sequences/:sequence_id/agent/training/:session_id/verdicts/',
      {
        schema: {
          operationId: 'giveTrainingVerdict',
          tags,
          summary: 'Give a written contact "Looks good" or a note',
          description:
            'Looks good counts toward `ready_after` (and keeps a pending rewrite, which then replaces the thread as written). A note resets the ' +
            'count, is kept as `pending` and makes a rewrite; given while another contact is being written it sets `note_waiting` and its ' +
            'rewrite runs as soon as that write lands. Once the rewrite lands the note is `learned` and its lesson counts. ' +
            '`expected_revision` is optional here; when given, a stale one is refused with 409.\n' +
            transitions,
          params: SessionParamsSchema,
          body: TrainingVerdictSchema,
          response: {
            200: TrainingSessionSchema,
            404: DetailBodySchema.describe('No such session, or the contact is not one of its samples'),
            409: conflict409,
            422: ValidationBodySchema,
          },
        },
      },
      async (request) => {
        const { sequence_id, session_id } = request.params;
        const row = await liveTrainingSession(
          sql,
          principalOf(request).workspaceId,
          sequence_id,
          session_id,
          request.body.expected_revision,
        );
        if (!row.doc.contacts.some((c) => c.record_id === request.body.record_id)) throw notFound('Training contact');
        const updateId = `verdict/${request.body.record_id}/${request.body.expected_revision ?? row.revision}`;
        return updateTrainingSession(temporal.client, temporal.taskQueue, row, giveVerdictUpdate, updateId, [
          request.body,
        ]);
      },
    );

    /** A change that carries only `expected_revision`: one route each, the same answers (reviseTrainingSession). */
    const revisionRoute = (
      change: RevisionChange,
      doc: { operationId: string; summary: string; description: string },
      body: typeof RevisionBodySchema | typeof OptionalRevisionBodySchema,
      invalid = ValidationBodySchema,
    ) =>
      app.post(
        `/sequences/:sequence_id/agent/training/:session_id/${change}/`,
        {
          schema: {
            ...doc,
            tags,
            params: SessionParamsSchema,
            body,
            response: { 200: TrainingSessionSchema, 404: DetailBodySchema, 409: conflict409, 422: invalid },
          },
        },
        async (request) =>
          reviseTrainingSession(
            { sql, temporal },
            change,
            {
              workspaceId: principalOf(request).workspaceId,
              sequenceId: request.params.sequence_id,
              sessionId: request.params.session_id,
            },
            request.body.expected_revision,
          ),
      );

    revisionRoute(
      'discard-changes',
      {
        operationId: 'discardTrainingChanges',
        summary: 'Drop the latest rewrite and the lesson that wrote it (endpoint 3)',
        description:
          'Drops the most recent rewrite still pending (not yet kept with Looks good) and the lesson that wrote it. The thread stays as ' +
          'written, the notes behind the rewrite are kept with state `discarded` (never learned), and the contact waits for a verdict ' +
          'again. A proposal already drafted with that lesson is withdrawn (the session goes back to `reviewing`). `expected_revision` ' +
          'is required: a stale revision is refused with 409 and nothing changes; 409 too when there is no pending rewrite. ' +
          'Closing the whole run is `close/`.\n' +
          transitions,
      },
      RevisionBodySchema,
      ValidationBodySchema.describe('expected_revision missing or below 1'),
    );
    revisionRoute(
      'apply',
      {
        operationId: 'applyTrainingProposal',
        summary: 'Apply the proposed prompt update: a new agent version; the session is completed',
        description: `Only a \`proposed\` session. The new version takes each changed slot's proposed prompt, on top of the agent as it is now.\n${transitions}`,
      },
      RevisionBodySchema,
    );
    revisionRoute(
      'abandon',
      {
        operationId: 'abandonTrainingProposal',
        summary: 'Decline the proposed prompt update: the session is abandoned and the agent stays as it was',
        description: `Only a \`proposed\` session.\n${transitions}`,
      },
      RevisionBodySchema,
    );
    revisionRoute(
      'close',
      {
        operationId: 'closeTrainingSession',
        summary: 'Close the whole run now, from any live status: the session is abandoned and nothing is applied',
        description: `A write under way is dropped and its credits go back. \`expected_revision\` is optional.\n${transitions}`,
      },
      OptionalRevisionBodySchema,
    );
  };
