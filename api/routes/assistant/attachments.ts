/**
 * Chat attachments (interface spec: Chat attachment pages; readChatAttachmentPages): upload a PDF,
 * XLSX or CSV to an assistant conversation, list a conversation's attachments, and read an
 * attachment's pages as text. The upload answers once the file's text is read (its workflow runs
 * the extraction on the worker), so a file that cannot be read is refused then, with the reason.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validatorCompiler } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { ApiError, ValidationRefusal, notFound } from '../../../domain/shared/errors.js';
import {
  archiveLimits,
  attachmentBytesMaxDefault,
  bytesLabel,
  ChatAttachmentListSchema,
  ChatAttachmentPagesQuerySchema,
  ChatAttachmentPagesResponseSchema,
  ChatAttachmentSchema,
  detectAttachmentKind,
  pageReadBytesMax,
} from '../../../domain/assistant/attachments.js';
import { readAttachment } from '../../../services/assistant/attachment-client.js';
import { readChatAttachmentPages } from '../../../services/assistant/attachment-pages.js';
import {
  conversationReadable,
  insertAttachment,
  listAttachments,
  readableAttachment,
} from '../../../store/assistant/attachments.js';
import type { AppDeps } from '../../deps.js';
import { readUpload, registerUploads } from '../../plugins/uploads.js';
import { shownAttachment } from '../../assistant-http.js';
import { readerOf } from '../../request-actor.js';

const ConversationParamsSchema = z.object({ conversation_id: UuidSchema });
const AttachmentParamsSchema = z.object({ attachment_id: UuidSchema });
const tags = ['assistant'];

const layoutRule =
  'A PDF page is laid out as printed: text on one baseline is one line, read left to right; a table row is one line with its columns side by side, ' +
  'and every gap wider than two average character widths (a gap between columns) is exactly three spaces, so a further line of a multi-line cell ' +
  "is a line of its own (starting with three spaces when it does not start at the page's left edge). A page without text (a blank or scanned page) " +
  'is an empty string; a page whose text cannot be read is `[page N could not be read: <reason>]`, N counted from 1. ' +
  'A spreadsheet has rows instead of pages: each row is one entry of `pages`, its cells joined by three spaces with empty trailing cells dropped. ' +
  "A workbook's sheets follow each other in workbook order, each starting with an entry `Sheet: <name>`; `page_count` counts every entry of the whole file.";

const sizeStop =
  `A read returns at most \`limit\` pages, and stops early before the page that would take its text past ${bytesLabel(pageReadBytesMax)} (UTF-8), ` +
  `so \`next_offset\` can come before offset + limit; it always returns at least one page (a page is stored at most ${bytesLabel(pageReadBytesMax)}, ` +
  'a longer one is cut and says so). An offset at or past the end returns no pages and a null `next_offset`.';

const uploadRules =
  `The file goes in the multipart form field \`file\` (one file; a body that is not valid multipart is 422), at most ${bytesLabel(attachmentBytesMaxDefault)} by default (the service's CHAT_ATTACHMENT_MAX_BYTES). ` +
  'Its kind is judged by its first bytes and its name: a PDF (`%PDF-`), an XLSX workbook (a zip archive named .xlsx) or a CSV (text named .csv or sent as text/csv; ' +
  'UTF-8, else Windows-1252; the delimiter is whichever of comma, semicolon, tab or bar the first line uses most; blank lines are skipped). Anything else is 415. ' +
  "The conversation must be one the caller sees (their own; a workspace admin's: any of the workspace's), else 404. " +
  'The answer comes once the text is read (201, `ready`). A file that cannot be read is 422 and stays listed as `failed` with the reason: ' +
  'a password-protected or damaged PDF, an encrypted or damaged workbook, an archive past its limits ' +
  `(${archiveLimits.entriesMax} entries, ${bytesLabel(archiveLimits.uncompressedBytesMax)} unpacked, an entry unpacking more than ${archiveLimits.ratioMax} times its size), ` +
  'or a file that takes longer or more memory to read than allowed. A PDF encrypted only against changes (no password to open it) is read. ';

/** A multipart body the parser cannot read (no boundary, cut short): 422, never a 500. */
export const chatAttachmentRoutes =
  ({ sql, temporal, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    // The size limit is applied per request (below), so a changed setting is heard at once.
    await registerUploads(app);

    app.post(
      '/assistant/conversations/:conversation_id/attachments/',
      {
        // The body is the multipart stream, read in the handler; only the path goes through the schemas.
        validatorCompiler: (route) =>
          route.httpPart === 'body' ? (data: unknown) => ({ value: data }) : validatorCompiler(route as never),
        schema: {
          operationId: 'uploadChatAttachment',
          tags,
          summary: 'Upload a PDF, XLSX or CSV file to a conversation; answers once its text is read',
          description: uploadRules + layoutRule,
          consumes: ['multipart/form-data'],
          params: ConversationParamsSchema,
          body: z.object({ file: z.string().meta({ format: 'binary' }).describe('The file: PDF, XLSX or CSV') }),
          response: {
            201: ChatAttachmentSchema,
            404: DetailBodySchema.describe(
              "The conversation is not one the caller sees (another member's, unless an admin; another workspace's)",
            ),
            413: DetailBodySchema.describe('The file is larger than the upload limit (the detail names it)'),
            415: DetailBodySchema.describe(
              'The file is not a PDF, an XLSX or a CSV, or the body is not multipart/form-data',
            ),
          },
        },
      },
      async (request, reply) => {
        const reader = readerOf(request);
        const { conversation_id: conversationId } = request.params;
        if (!(await conversationReadable(sql, reader, conversationId))) throw notFound('Conversation');
        const { filename, mimetype, content } = await readUpload(request, {
          maxBytes: integrations.chatAttachments.maxUploadBytes,
          what: 'An attachment',
          fallbackName: 'attachment',
        });
        const kind = detectAttachmentKind(content.subarray(0, 2048), filename, mimetype);
        if (typeof kind !== 'string') throw new ApiError('unsupported_media_type', kind.refused);
        const attachment = await insertAttachment(sql, reader, {
          conversationId,
          filename,
          contentType: mimetype || 'application/octet-stream',
          kind,
          content,
        });
        if (!attachment) throw notFound('Conversation');
        const outcome = await readAttachment(temporal.client, temporal.taskQueue, attachment);
        if (outcome.status === 'failed') {
          throw new ValidationRefusal([
            { loc: ['body', 'file'], msg: outcome.error, type: 'unreadable_file', input: filename },
          ]);
        }
        const read = await readableAttachment(sql, reader, attachment.id);
        if (!read) throw notFound('Attachment');
        return reply.code(201).send(shownAttachment(read));
      },
    );

    app.get(
      '/assistant/conversations/:conversation_id/attachments/',
      {
        schema: {
          operationId: 'listChatAttachments',
          tags,
          summary: "A conversation's attachments, oldest first",
          description:
            "Every attachment of the conversation, `failed` ones with their reason. Not paged. A conversation the caller cannot see (another member's, unless the caller is an admin; another workspace's) is 404.",
          params: ConversationParamsSchema,
          response: {
            200: ChatAttachmentListSchema,
            404: DetailBodySchema.describe(
              "The conversation is not one the caller sees (another member's, unless an admin; another workspace's)",
            ),
          },
        },
      },
      async (request) => {
        const reader = readerOf(request);
        if (!(await conversationReadable(sql, reader, request.params.conversation_id))) throw notFound('Conversation');
        return {
          attachments: (await listAttachments(sql, reader.workspaceId, request.params.conversation_id)).map(
            shownAttachment,
          ),
        };
      },
    );

    app.get(
      '/chat-attachments/:attachment_id/pages/',
      {
        schema: {
          operationId: 'readChatAttachmentPages',
          tags,
          summary: "An attachment's pages as text (endpoint 1)",
          description:
            "Only the caller's own files are readable: those of the caller's conversations (a workspace admin's: every member's), never another workspace's; any other id is 404. " +
            `An attachment whose file could not be read is 422 with the reason; one still being read, 503. ${sizeStop} ${layoutRule}`,
          params: AttachmentParamsSchema,
          querystring: ChatAttachmentPagesQuerySchema,
          response: {
            200: ChatAttachmentPagesResponseSchema,
            404: DetailBodySchema.describe("No attachment with this id among the caller's"),
            503: DetailBodySchema.describe(
              "The attachment's text is still being read; try again shortly (Retry-After)",
            ),
          },
        },
      },
      async (request) =>
        readChatAttachmentPages({ sql }, readerOf(request), request.params.attachment_id, request.query),
    );
  };
