/**
 * Sequences: the versioned graph, audience and senders, launching and pausing, enrolment and
 * contacts, version migration, the approval queue of manual mode, and the workspace's recontact
 * cooldown: handlers and their schemas. Contacts move in their own workflows
 * (`sequence-contact/<sequence_id>/<contact_id>`); a handler that changes something calls its one
 * use case in services/sequences/ (sequences.ts, contacts.ts, approvals.ts), which writes Postgres
 * first and then wakes the contacts concerned, and shapes its answer. Reads go to the store.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema, ValidationBodySchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  ApprovalListQuerySchema,
  ApprovalListSchema,
  ApprovalSchema,
  ApproveRequestSchema,
  ContactListQuerySchema,
  EnrolRequestSchema,
  EnrolResponseSchema,
  MigrateRequestSchema,
  MigrateResponseSchema,
  RejectRequestSchema,
  RevisionBodySchema,
  SequenceContactListSchema,
  SequenceContactSchema,
  SequenceCreateSchema,
  SequenceListSchema,
  SequenceSchema,
  SequenceSettingsSchema,
  SequenceSettingsUpdateSchema,
  SequenceUpdateSchema,
  SequenceVersionListSchema,
} from '../../../domain/sequences/sequences.js';
import {
  getApproval,
  getContact,
  getSequence,
  getSettings,
  listApprovals,
  listContacts,
  listSequences,
  listVersions,
  recordEmailOpen,
  toContact,
  updateSettings,
  type SequenceTransition,
} from '../../../store/sequences/sequences.js';
import { approveMessage, rejectMessage } from '../../../services/sequences/approvals.js';
import {
  changeContactState,
  enrolContacts,
  migrateContacts,
  retrySequenceContact,
} from '../../../services/sequences/contacts.js';
import { createSequence, transitionSequence, updateSequence } from '../../../services/sequences/sequences.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const SequenceParamsSchema = z.object({ sequence_id: UuidSchema });
const ContactParamsSchema = z.object({ sequence_id: UuidSchema, contact_id: UuidSchema });
const ApprovalParamsSchema = z.object({ approval_id: UuidSchema });
const tags = ['sequences'];
const approvalTags = ['sequence-approvals'];

/** A transparent 1x1 GIF. */
const pixel = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

const transitionDocs: Record<SequenceTransition, string> = {
  launch:
    'Start sending: a draft becomes active and every enrolled contact starts on its first step. Refused (422) while an agent-written step has no outbound agent on this sequence, or a pnet step has no sender.',
  pause:
    "Hold every step: timers that end while paused wait, pnet steps are held out of every browser's line, and nothing is sent.",
  resume: 'Continue after a pause; contacts whose wait ended meanwhile go on at once.',
  archive: 'End the sequence: every contact still in it stops (`archived`) and its waiting pnet steps are cancelled.',
};

export const sequenceRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { sql } = deps;

    app.post(
      '/sequences/',
      {
        schema: {
          operationId: 'createSequence',
          tags,
          summary: 'Create a sequence (a draft) with its audience table, senders and step graph',
          description:
            'The graph must start at an existing step, every target must exist, every step must be reachable, and a loop must pass a wait of some length; otherwise 422 with `issues`. ' +
            'Mapped columns must be columns of the audience table (409).',
          body: SequenceCreateSchema,
          response: {
            201: SequenceSchema,
            404: DetailBodySchema.describe('The audience table or a sender is not in this workspace'),
            409: DetailBodySchema,
            422: ValidationBodySchema,
          },
        },
      },
      async (request, reply) => {
        const sequence = await createSequence(deps, principalOf(request).workspaceId, request.body);
        return reply.code(201).send(sequence);
      },
    );

    app.get(
      '/sequences/',
      {
        schema: {
          operationId: 'listSequences',
          tags,
          summary: 'List sequences, newest first (at most 500)',
          response: { 200: SequenceListSchema },
        },
      },
      async (request) => ({ sequences: await listSequences(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/sequences/settings/',
      {
        schema: {
          operationId: 'readSequenceSettings',
          tags,
          summary: "The workspace's outreach settings (the recontact cooldown)",
          response: { 200: SequenceSettingsSchema },
        },
      },
      async (request) => getSettings(sql, principalOf(request).workspaceId),
    );

    app.patch(
      '/sequences/settings/',
      {
        schema: {
          operationId: 'updateSequenceSettings',
          tags,
          summary: 'Set the recontact cooldown (0 to 365 days; 30 until set)',
          description:
            'Checked at enrolment and again right before every send: nobody is reached by two different sequences inside the cooldown.',
          body: SequenceSettingsUpdateSchema,
          response: { 200: SequenceSettingsSchema },
        },
      },
      async (request) => updateSettings(sql, principalOf(request).workspaceId, request.body.recontact_cooldown_days),
    );

    app.get(
      '/sequences/:sequence_id/',
      {
        schema: {
          operationId: 'readSequence',
          tags,
          summary: 'Read a sequence with its newest graph and contact counts',
          params: SequenceParamsSchema,
          response: { 200: SequenceSchema },
        },
      },
      async (request) => {
        const sequence = await getSequence(sql, principalOf(request).workspaceId, request.params.sequence_id);
        if (!sequence) throw notFound('Sequence');
        return sequence;
      },
    );

    app.patch(
      '/sequences/:sequence_id/',
      {
        schema: {
          operationId: 'updateSequence',
          tags,
          summary: 'Edit a sequence; a new graph on a sequence with contacts makes a new version',
          description:
            'Contacts in flight finish on the version they started unless a person migrates them (`POST .../contacts/migrate/`). ' +
            '`expected_revision` is required: a stale one is 409 and nothing changes. Graph rules as on create (422). ' +
            'Changing senders affects new contacts only; a contact stays with its sender.',
          params: SequenceParamsSchema,
          body: SequenceUpdateSchema,
          response: { 200: SequenceSchema, 404: DetailBodySchema, 409: DetailBodySchema, 422: ValidationBodySchema },
        },
      },
      async (request) =>
        updateSequence(deps, principalOf(request).workspaceId, request.params.sequence_id, request.body),
    );

    for (const action of ['launch', 'pause', 'resume', 'archive'] as const) {
      app.post(
        `/sequences/:sequence_id/${action}/`,
        {
          schema: {
            operationId: `${action}Sequence`,
            tags,
            summary: `${action[0]!.toUpperCase()}${action.slice(1)} the sequence`,
            description: `${transitionDocs[action]} \`expected_revision\` is required; a stale one, or a status this cannot leave, is 409.`,
            params: SequenceParamsSchema,
            body: RevisionBodySchema,
            response: { 200: SequenceSchema, 404: DetailBodySchema, 409: DetailBodySchema, 422: ValidationBodySchema },
          },
        },
        async (request) =>
          transitionSequence(
            deps,
            principalOf(request).workspaceId,
            request.params.sequence_id,
            action,
            request.body.expected_revision,
          ),
      );
    }

    app.get(
      '/sequences/:sequence_id/versions/',
      {
        schema: {
          operationId: 'listSequenceVersions',
          tags,
          summary: 'Every version of the graph, oldest first, with how many contacts are on each',
          params: SequenceParamsSchema,
          response: { 200: SequenceVersionListSchema },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        if (!(await getSequence(sql, workspaceId, request.params.sequence_id))) throw notFound('Sequence');
        return { versions: await listVersions(sql, workspaceId, request.params.sequence_id) };
      },
    );

    app.post(
      '/sequences/:sequence_id/contacts/',
      {
        schema: {
          operationId: 'enrolSequenceContacts',
          tags,
          summary: 'Enrol rows of the audience table (1 to 1000); each row is answered on its own',
          description:
            'A row is refused (not the request) when it is not in the audience table, has neither an email nor a profile URL through the mappings, ' +
            'is the same person (email or profile URL) as another contact of this sequence (`already_in_sequence`) or an earlier row of the request (`duplicate_person`), ' +
            'is on the do-not-contact list, replied, bounced or was stopped inside the recontact cooldown, was reached by another sequence inside the cooldown, ' +
            'or is active in another sequence. A row already enrolled answers `already_enrolled`. Contacts are spread across the senders round-robin and stay with theirs. ' +
            'Contacts of a draft sequence wait for its launch. A row id given twice is answered the same both times. ' +
            'With `feed_new_rows` on, rows added to the audience table later are enrolled the same way as they arrive (within about 30 seconds).',
          params: SequenceParamsSchema,
          body: EnrolRequestSchema,
          response: { 200: EnrolResponseSchema, 404: DetailBodySchema, 409: DetailBodySchema },
        },
      },
      async (request) =>
        enrolContacts(
          deps,
          principalOf(request).workspaceId,
          request.params.sequence_id,
          request.body.row_ids,
          request.body.sender_profile_id,
        ),
    );

    app.get(
      '/sequences/:sequence_id/contacts/',
      {
        schema: {
          operationId: 'listSequenceContacts',
          tags,
          summary: 'Contacts of a sequence in enrolment order, with what each waits on and until when',
          params: SequenceParamsSchema,
          querystring: ContactListQuerySchema,
          response: { 200: SequenceContactListSchema },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        if (!(await getSequence(sql, workspaceId, request.params.sequence_id))) throw notFound('Sequence');
        return listContacts(sql, workspaceId, request.params.sequence_id, request.query);
      },
    );

    app.post(
      '/sequences/:sequence_id/contacts/migrate/',
      {
        schema: {
          operationId: 'migrateSequenceContacts',
          tags,
          summary: 'Move contacts in flight to another version; steps they already had are never repeated',
          description:
            'Each contact continues at the step with the same id on the new version (or `at_step_id`); a contact whose step is not there and no `at_step_id` is answered `step_not_in_version`. ' +
            'Each contact is answered on its own.',
          params: SequenceParamsSchema,
          body: MigrateRequestSchema,
          response: { 200: MigrateResponseSchema, 404: DetailBodySchema },
        },
      },
      async (request) => {
        const results = await migrateContacts(
          deps,
          principalOf(request).workspaceId,
          request.params.sequence_id,
          request.body,
        );
        return { results: results.map((r) => ({ ...r, contact: r.contact ? toContact(r.contact) : null })) };
      },
    );

    app.get(
      '/sequences/:sequence_id/contacts/:contact_id/',
      {
        schema: {
          operationId: 'readSequenceContact',
          tags,
          summary: 'Read a contact: status, step, version, steps done, and its wait',
          params: ContactParamsSchema,
          response: { 200: SequenceContactSchema },
        },
      },
      async (request) => {
        const c = await getContact(
          sql,
          principalOf(request).workspaceId,
          request.params.sequence_id,
          request.params.contact_id,
        );
        if (!c) throw notFound('Sequence contact');
        return toContact(c);
      },
    );

    const contactActions = {
      pause:
        "Pause the contact: its timers hold and its pnet steps are held out of every browser's line (409 unless active).",
      resume: 'Resume a paused contact (409 unless paused).',
      stop: 'Stop the contact for good: no further step or send happens, its waiting messages stop and its waiting pnet steps are cancelled (409 once finished).',
      retry:
        'Retry a contact stopped at a failed step: a failed pnet step is retried (verify first if it may have acted), a cancelled one is queued afresh (409 unless failed).',
    } as const;
    for (const action of Object.keys(contactActions) as (keyof typeof contactActions)[]) {
      app.post(
        `/sequences/:sequence_id/contacts/:contact_id/${action}/`,
        {
          schema: {
            operationId: `${action}SequenceContact`,
            tags,
            summary: contactActions[action],
            params: ContactParamsSchema,
            response: { 200: SequenceContactSchema, 404: DetailBodySchema, 409: DetailBodySchema },
          },
        },
        async (request) => {
          const { workspaceId } = principalOf(request);
          const { sequence_id, contact_id } = request.params;
          const contact =
            action === 'retry'
              ? await retrySequenceContact(deps, workspaceId, sequence_id, contact_id)
              : await changeContactState(deps, workspaceId, sequence_id, contact_id, action);
          return toContact(contact);
        },
      );
    }

    app.get(
      '/sequences/opens/:open_token/',
      {
        config: { access: 'public' },
        schema: {
          operationId: 'recordSequenceEmailOpen',
          tags,
          summary: 'The open-tracking pixel of a sequence email (public: mail clients load it without credentials)',
          description:
            'Sequence emails carry it when the service knows its public address (PUBLIC_BASE_URL). Loading it records the first open, which the `opened` branch reads. ' +
            'It always answers the same 1x1 image, so it tells nobody whether a token exists.',
          params: z.object({
            open_token: z
              .string()
              .regex(/^[0-9a-f]{32}$/)
              .describe("The token in the pixel's address"),
          }),
          response: {
            200: { description: 'A transparent 1x1 GIF', content: { 'image/gif': { schema: z.string() } } },
            422: ValidationBodySchema,
          },
        },
      },
      async (request, reply) => {
        await recordEmailOpen(sql, request.params.open_token);
        return reply
          .type('image/gif')
          .header('cache-control', 'no-store')
          .send(pixel as never);
      },
    );

    // ---------------------------------------------------------------------------------------------
    // Approval queue (manual mode, and messages that need a person)

    app.get(
      '/sequences/approvals/',
      {
        schema: {
          operationId: 'listSequenceApprovals',
          tags: approvalTags,
          summary: 'Messages waiting for a person, oldest first',
          description:
            'In manual mode every outbound message of the channel waits here; in automatic mode only those that need a person (a required template value missing, the agent asked for review or could not write). ' +
            'Messages of a paused sequence or contact are not listed until they resume.',
          querystring: ApprovalListQuerySchema,
          response: { 200: ApprovalListSchema },
        },
      },
      async (request) => ({ approvals: await listApprovals(sql, principalOf(request).workspaceId, request.query) }),
    );

    app.get(
      '/sequences/approvals/:approval_id/',
      {
        schema: {
          operationId: 'readSequenceApproval',
          tags: approvalTags,
          summary: 'Read one message of the approval queue (any status)',
          params: ApprovalParamsSchema,
          response: { 200: ApprovalSchema },
        },
      },
      async (request) => {
        const approval = await getApproval(sql, principalOf(request).workspaceId, request.params.approval_id);
        if (!approval) throw notFound('Approval');
        return approval;
      },
    );

    app.post(
      '/sequences/approvals/:approval_id/approve/',
      {
        schema: {
          operationId: 'approveSequenceMessage',
          tags: approvalTags,
          summary: "Approve a message, optionally edited first (subject, body); it goes out on the contact's schedule",
          description:
            'Deciding a message already decided is 409. The send still checks do-not-contact, replies, the cooldown and other sequences at the last moment.',
          params: ApprovalParamsSchema,
          body: ApproveRequestSchema,
          response: { 200: ApprovalSchema, 404: DetailBodySchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const { workspaceId, memberId } = principalOf(request);
        return approveMessage(deps, workspaceId, request.params.approval_id, memberId, request.body);
      },
    );

    app.post(
      '/sequences/approvals/:approval_id/reject/',
      {
        schema: {
          operationId: 'rejectSequenceMessage',
          tags: approvalTags,
          summary: 'Reject a message: the contact moves on without it, or stops (`stop_contact`)',
          params: ApprovalParamsSchema,
          body: RejectRequestSchema,
          response: { 200: ApprovalSchema, 404: DetailBodySchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const { workspaceId, memberId } = principalOf(request);
        return rejectMessage(deps, workspaceId, request.params.approval_id, memberId, {
          reason: request.body.reason,
          stopContact: request.body.stop_contact,
        });
      },
    );
  };
