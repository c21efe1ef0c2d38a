/**
 * The inbound-email webhook: a mail provider (or a relay in front of an MTA) posts each received
 * message as raw MIME. It carries no API key; it is signed instead, HMAC-SHA256 with the
 * workspace's webhook secret over `<timestamp>.<raw body>`. A missing, wrong or stale signature
 * is 401 with one message, so a caller learns nothing about which part failed.
 */
import { timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { validatorCompiler, type FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { InboundEmailError, recordInboundEmail } from '../../../store/inbox/messages.js';
import { DetailBodySchema, ValidationBodySchema } from '../../../domain/shared/common.js';
import { ApiError } from '../../../domain/shared/errors.js';
import { InboundEmailResultSchema, webhookToleranceSeconds } from '../../../domain/inbox/inbox.js';
import { inboundSignatureRefused, signInboundEmail } from '../../../domain/inbox/inbound-signature.js';
import type { AppDeps } from '../../deps.js';
import { readSettings } from '../../../store/inbox/settings.js';
import { ValidationRefusal } from '../../../domain/shared/errors.js';
import { wakeSequenceContacts } from '../../../services/sequences/stops.js';

const rawTypes = ['message/rfc822', 'application/octet-stream'];
export const inboundEmailBytesMax = 25 * 1024 * 1024;

const HeadersSchema = z.object({
  'x-inbox-workspace': z.string().optional().describe('The workspace id the message is for'),
  'x-inbox-timestamp': z
    .string()
    .optional()
    .describe(`Unix seconds when it was signed; more than ${webhookToleranceSeconds} s from our clock is stale`),
  'x-inbox-signature': z
    .string()
    .optional()
    .describe('`sha256=` then the hex HMAC-SHA256 of `<timestamp>.<raw body>` with the webhook secret'),
});

export const inboundEmailRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { sql } = deps;
    // Raw bytes, exactly as signed; this scope only.
    app.addContentTypeParser(rawTypes, { parseAs: 'buffer', bodyLimit: inboundEmailBytesMax }, (_request, body, done) =>
      done(null, body),
    );

    app.post(
      '/inbox/inbound-email/',
      {
        config: { access: 'public' },
        bodyLimit: inboundEmailBytesMax,
        // The body is the raw message, judged by its signature; only the headers go through the schema.
        validatorCompiler: (route) =>
          route.httpPart === 'body' ? (data: unknown) => ({ value: data }) : validatorCompiler(route as never),
        schema: {
          operationId: 'receiveInboundEmail',
          tags: ['inbox'],
          summary: 'Receive one email (raw MIME, message/rfc822) for a workspace: a reply, a bounce or an auto-reply',
          description:
            'Not API-key authenticated: signed with the workspace webhook secret (`POST /inbox/settings/webhook-secret/`). ' +
            'Headers `X-Inbox-Workspace`, `X-Inbox-Timestamp` (unix seconds) and `X-Inbox-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">`. ' +
            `A timestamp more than ${webhookToleranceSeconds} s off is refused as stale (401). The message is threaded by In-Reply-To / References, ` +
            'classified (a delivery status notification is a bounce of the failed recipient; Auto-Submitted and out-of-office headers mark an auto-reply, which never stops a sequence), ' +
            'and recorded once per Message-ID: a redelivery answers 200 with `duplicate: true`.',
          consumes: rawTypes,
          headers: HeadersSchema,
          body: z.any().describe('The message as received, RFC 5322'),
          response: {
            200: InboundEmailResultSchema,
            401: DetailBodySchema,
            413: DetailBodySchema.describe('Larger than 25 MiB'),
            415: DetailBodySchema.describe('Not message/rfc822 or application/octet-stream'),
            422: ValidationBodySchema.describe('The message names no sender to file it under'),
          },
        },
      },
      async (request) => {
        const workspaceId = request.headers['x-inbox-workspace'];
        const timestamp = request.headers['x-inbox-timestamp'];
        const signature = request.headers['x-inbox-signature'];
        const body: unknown = request.body;
        if (
          typeof workspaceId !== 'string' ||
          !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(workspaceId)
        )
          throw inboundSignatureRefused();
        if (typeof timestamp !== 'string' || !/^\d{1,12}$/.test(timestamp) || typeof signature !== 'string')
          throw inboundSignatureRefused();
        if (Math.abs(Date.now() / 1000 - Number(timestamp)) > webhookToleranceSeconds) throw inboundSignatureRefused();
        const { webhook_secret: secret } = await readSettings(sql, workspaceId);
        if (!secret) throw inboundSignatureRefused();
        if (!Buffer.isBuffer(body))
          throw new ApiError(
            'unsupported_media_type',
            'Send the message as the body with Content-Type: message/rfc822.',
          );
        const expected = Buffer.from(signInboundEmail(secret, timestamp, body));
        const given = Buffer.from(
          signature.trim().toLowerCase().startsWith('sha256=')
            ? signature.trim().toLowerCase()
            : `sha256=${signature.trim().toLowerCase()}`,
        );
        if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw inboundSignatureRefused();
        try {
          const result = await recordInboundEmail(sql, workspaceId, body);
          if (!result.duplicate && result.wakeEmail) {
            wakeSequenceContacts(deps, workspaceId, { emails: [result.wakeEmail] }).catch((err: unknown) =>
              request.log.warn({ err }, 'could not wake sequence contacts'),
            );
          }
          const { wakeEmail: _wake, ...answer } = result;
          return answer;
        } catch (err) {
          if (err instanceof InboundEmailError) {
            throw new ValidationRefusal([{ loc: ['body'], msg: err.message, type: 'value_error', input: '' }]);
          }
          throw err;
        }
      },
    );
  };
