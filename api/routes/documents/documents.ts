/**
 * AI business-context documents (decision 035; interface spec: AI business context documents,
 * Reference document status, Limits): a workspace's files about what it sells, each summarised once
 * (by the chat model, or the local extract), whose included summaries every assistant prompt reads,
 * oldest first, within a character budget. An upload commits the row `pending` and answers 202
 * before its workflow starts; the workflow takes it to `processing`, then `ready` or `failed`.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validatorCompiler } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { ApiError, ValidationRefusal, notFound } from '../../../domain/shared/errors.js';
import { bytesLabel } from '../../../domain/assistant/attachments.js';
import {
  BusinessDocumentListSchema,
  BusinessDocumentSchema,
  DriveLinkAnswerSchema,
  DriveLinkRequestSchema,
  detectDocumentKind,
  GenerateRequestSchema,
  kindContentTypes,
  RereadRequestSchema,
  stepsMax,
  summaryMax,
  titleFromFilename,
  UpdateBusinessDocumentSchema,
} from '../../../domain/documents/documents.js';
import { startDocumentRun } from '../../../services/documents/document-client.js';
import { addDocument, documentsFull, shownDocument } from '../../../services/documents/add-document.js';
import { cloudDriveClientOf, cloudDriveState } from '../../../services/cloud-drive/drive.js';
import { generateCompanyDocument, SiteUnreadable } from '../../../services/documents/generate.js';
import {
  deleteDocument,
  getDocument,
  insertDriveDocuments,
  listDocuments,
  startRerun,
  updateDocument,
  withBudget,
} from '../../../store/documents/documents.js';
import type { AppDeps } from '../../deps.js';
import { readUpload, registerUploads } from '../../plugins/uploads.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['business-context'];
const DocumentParamsSchema = z.object({ document_id: UuidSchema });

export const businessDocumentRoutes =
  ({ sql, temporal, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    await registerUploads(app);
    const limits = integrations.businessDocuments;

    app.get(
      '/business-context/documents/',
      {
        schema: {
          operationId: 'listBusinessDocuments',
          tags,
          summary: "The workspace's business-context documents, oldest first",
          description:
            'Every document with its status and summary. `in_prompt_budget` is false for an included ready document whose summary no longer fits ' +
            '`max_context_chars`, counted over included ready summaries oldest first (that one and every later one); the prompt reads the others.',
          response: { 200: BusinessDocumentListSchema },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        return {
          documents: withBudget(await listDocuments(sql, workspaceId), limits.contextChars).map((d) =>
            shownDocument(d, d.in_prompt_budget),
          ),
          max_documents: limits.maxDocuments,
          max_context_chars: limits.contextChars,
        };
      },
    );

    app.post(
      '/business-context/documents/',
      {
        validatorCompiler: (route) =>
          route.httpPart === 'body' ? (data: unknown) => ({ value: data }) : validatorCompiler(route as never),
        schema: {
          operationId: 'uploadBusinessDocument',
          tags,
          summary: 'Upload a business-context document; answers 202 while it is processed',
          description:
            `The file goes in the multipart form field \`file\`, at most ${bytesLabel(limits.maxUploadBytes)} (the service's DOCUMENT_MAX_BYTES; larger is 413): ` +
            'a PDF, a Word document (.docx), Markdown (.md), plain text (.txt) or HTML (.html); anything else is 415. ' +
            'The document is committed `pending` and answered at once (202); its workflow reads the text, cuts it into chunks and writes a summary ' +
            '(by the chat model when one is configured, else a local extract that says so), then makes it `ready`, or `failed` with what to do. ' +
            `A workspace at max_documents is 409. The title is the file's name without its extension.`,
          consumes: ['multipart/form-data'],
          body: z.object({
            file: z.string().meta({ format: 'binary' }).describe('The file: PDF, DOCX, Markdown, plain text or HTML'),
          }),
          response: {
            202: BusinessDocumentSchema,
            409: DetailBodySchema.describe(
              'The workspace already keeps max_documents documents (the detail names the limit)',
            ),
            413: DetailBodySchema.describe('The file is larger than the upload limit (the detail names it)'),
            415: DetailBodySchema.describe(
              'The file is not a PDF, DOCX, Markdown, plain text or HTML, or the body is not multipart/form-data',
            ),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const { filename, mimetype, content } = await readUpload(request, {
          maxBytes: limits.maxUploadBytes,
          what: 'A business-context document',
          fallbackName: 'document',
        });
        const kind = detectDocumentKind(content.subarray(0, 2048), filename, mimetype);
        if (typeof kind !== 'string') throw new ApiError('unsupported_media_type', kind.refused);
        return reply.code(202).send(
          await addDocument({ sql, temporal }, limits.maxDocuments, workspaceId, {
            title: titleFromFilename(filename),
            filename,
            contentType: kindContentTypes[kind],
            content,
          }),
        );
      },
    );

    app.post(
      '/business-context/documents/generate/',
      {
        schema: {
          operationId: 'generateBusinessDocument',
          tags,
          summary: "Write a business-context document from a company's own site",
          description:
            'Reads the home page of the bare company domain (over https) and its same-site pages /about, /pricing, /products and /customers when they exist, ' +
            "through the web page reader's address checks (no loopback, private or link-local address, on every redirect), and writes a Markdown document " +
            '(`<domain>.md`, source `upload`) of what the company does, for whom, and its offers, each fact with its source page and a confidence (high, medium, low): ' +
            'by the chat model when one is configured, else a local extract of the pages that says so. The document is then processed like an upload (202, `pending`). ' +
            'A URL, a path, a port or an IP address is 422; a home page that cannot be read is 422 with the reason; a workspace at max_documents is 409.',
          body: GenerateRequestSchema,
          response: {
            202: BusinessDocumentSchema,
            409: DetailBodySchema.describe(
              'The workspace already keeps max_documents documents (the detail names the limit)',
            ),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const { domain } = request.body;
        const count = (await listDocuments(sql, workspaceId)).length;
        if (count >= limits.maxDocuments) throw documentsFull(limits.maxDocuments);
        let markdown: string;
        try {
          ({ markdown } = await generateCompanyDocument(
            { reader: limits.pageReader, siteOrigin: limits.siteOrigin, chatModel: integrations.chatModel },
            domain,
          ));
        } catch (error) {
          if (error instanceof SiteUnreadable)
            throw new ValidationRefusal([
              { loc: ['body', 'domain'], msg: error.message, type: 'site_unreadable', input: domain },
            ]);
          throw error;
        }
        const content = Buffer.from(markdown, 'utf8');
        return reply.code(202).send(
          await addDocument({ sql, temporal }, limits.maxDocuments, workspaceId, {
            title: domain,
            filename: `${domain}.md`,
            contentType: kindContentTypes.markdown,
            content,
          }),
        );
      },
    );

    app.post(
      '/business-context/documents/drive/',
      {
        schema: {
          operationId: 'linkDriveDocuments',
          tags,
          summary: 'Add files of the connected cloud drive as business-context documents',
          description:
            'One `cloud_drive` document per file id (1 to 25), answered in the order picked, each `pending` and processed like an upload: the file is read from the drive ' +
            '(native documents exported as text, other files downloaded) at every run, and its name, type and `drive_web_view_link` are filled in then. ' +
            'A file the account cannot read (not found, no access, an unsupported kind) makes that document `failed` with the reason, not the request. ' +
            'No drive connected is 409; a workspace the files would take past max_documents is 409 and nothing is added; a drive not configured is 503.',
          body: DriveLinkRequestSchema,
          response: {
            202: DriveLinkAnswerSchema,
            409: DetailBodySchema.describe(
              'No drive connected, or the files would take the workspace past max_documents (the detail names the limit)',
            ),
            503: DetailBodySchema.describe('The cloud drive is not configured (the detail names the variables to set)'),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        cloudDriveClientOf(integrations);
        const drive = await cloudDriveState(sql, workspaceId);
        if (!drive.connected)
          throw new ApiError(
            'conflict',
            'No cloud drive is connected to this workspace: connect one (POST /cloud-drive/connect/) first.',
          );
        const made = await insertDriveDocuments(sql, workspaceId, request.body.file_ids, limits.maxDocuments);
        if (made === 'full') throw documentsFull(limits.maxDocuments);
        for (const document of made) await startDocumentRun(temporal.client, temporal.taskQueue, document, sql);
        return reply.code(202).send({ documents: made.map((d) => shownDocument(d)) });
      },
    );

    app.get(
      '/business-context/documents/:document_id/',
      {
        schema: {
          operationId: 'readBusinessDocument',
          tags,
          summary: 'One business-context document',
          description: `Its status, summary and the steps of its latest processing run (at most ${stepsMax}). A single read reports in_prompt_budget true.`,
          params: DocumentParamsSchema,
          response: {
            200: BusinessDocumentSchema,
            404: DetailBodySchema.describe("No document with this id in the caller's workspace"),
          },
        },
      },
      async (request) => {
        const doc = await getDocument(sql, principalOf(request).workspaceId, request.params.document_id);
        if (!doc) throw notFound('Document');
        return shownDocument(doc);
      },
    );

    app.patch(
      '/business-context/documents/:document_id/',
      {
        schema: {
          operationId: 'updateBusinessDocument',
          tags,
          summary: 'Change whether a document is in the context, its summary or its title',
          description:
            'A tri-state patch: a field left out keeps its value. `summary` a string (at most ' +
            `${summaryMax} characters) saves it by hand and sets summary_edited; null clears it and generates it again (a re-read with regenerate_summary, ` +
            'started when the document has settled; one under way writes it). `title` is 1 to 255 characters.',
          params: DocumentParamsSchema,
          body: UpdateBusinessDocumentSchema,
          response: {
            200: BusinessDocumentSchema,
            404: DetailBodySchema.describe("No document with this id in the caller's workspace"),
          },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        const id = request.params.document_id;
        let doc = await updateDocument(sql, workspaceId, id, request.body);
        if (!doc) throw notFound('Document');
        if (request.body.summary === null) {
          const rerun = await startRerun(sql, workspaceId, id, true);
          if (rerun && rerun !== 'busy') {
            await startDocumentRun(temporal.client, temporal.taskQueue, rerun, sql);
            doc = rerun;
          }
        }
        return shownDocument(doc);
      },
    );

    app.delete(
      '/business-context/documents/:document_id/',
      {
        schema: {
          operationId: 'deleteBusinessDocument',
          tags,
          summary: 'Delete a business-context document',
          description:
            'The document, its text and its summary are gone; a run under way finds it gone and writes nothing.',
          params: DocumentParamsSchema,
          response: {
            204: z.null().describe('Deleted'),
            404: DetailBodySchema.describe("No document with this id in the caller's workspace"),
          },
        },
      },
      async (request, reply) => {
        if (!(await deleteDocument(sql, principalOf(request).workspaceId, request.params.document_id)))
          throw notFound('Document');
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/business-context/documents/:document_id/reread/',
      {
        schema: {
          operationId: 'rereadBusinessDocument',
          tags,
          summary: 'Process a settled document again',
          description:
            "Starts a new run (202, `pending`, steps empty): the file is read again (its text kept from the last read, once the upload's bytes are dropped) and summarised. " +
            'A summary edited by hand is kept unless `regenerate_summary` is true. A document whose run is still under way is 409 (two re-reads at once run one).',
          params: DocumentParamsSchema,
          body: RereadRequestSchema.optional(),
          response: {
            202: BusinessDocumentSchema,
            404: DetailBodySchema.describe("No document with this id in the caller's workspace"),
            409: DetailBodySchema.describe(
              'The document is still pending or processing; wait until it is ready or failed',
            ),
          },
        },
      },
      async (request, reply) => {
        const rerun = await startRerun(
          sql,
          principalOf(request).workspaceId,
          request.params.document_id,
          request.body?.regenerate_summary ?? false,
        );
        if (!rerun) throw notFound('Document');
        if (rerun === 'busy')
          throw new ApiError(
            'conflict',
            'The document is still being processed; re-read it once it is ready or failed.',
          );
        await startDocumentRun(temporal.client, temporal.taskQueue, rerun, sql);
        return reply.code(202).send(shownDocument(rerun));
      },
    );
  };
