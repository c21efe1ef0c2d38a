/**
 * One uploaded file from a multipart body (chat attachments, business-context documents): the
 * form field `file`, read to a buffer within a size limit. Not multipart is 415; a body that is
 * not valid multipart, or without the `file` field, is 422 `issues`; past the limit is 413 with
 * what the limit is.
 */
import fastifyMultipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bytesLabel, cleanText } from '../../domain/assistant/attachments.js';
import { ApiError, ValidationRefusal } from '../../domain/shared/errors.js';

/** Registers multipart parsing on a routes plugin that takes uploads: one file, a few small fields. */
export const registerUploads = (app: FastifyInstance) =>
  app.register(fastifyMultipart, { limits: { files: 1, fields: 10, parts: 20, fieldSize: 1024 } });

function unreadableBody(error: unknown): ValidationRefusal {
  const reason = cleanText(String((error as Error)?.message ?? error)).trim();
  return new ValidationRefusal([
    {
      loc: ['body'],
      msg: `The body is not valid multipart/form-data (${reason})`,
      type: 'multipart_invalid',
      input: {},
    },
  ]);
}

export interface Upload {
  /** One line, at most 255 characters; `fallbackName` when the part named none. */
  filename: string;
  mimetype: string;
  content: Buffer;
}

/** The request's file; `what` names it in the 413 ("An attachment", "A business-context document"). */
export async function readUpload(
  request: FastifyRequest,
  options: { maxBytes: number; what: string; fallbackName: string },
): Promise<Upload> {
  if (!request.isMultipart())
    throw new ApiError('unsupported_media_type', 'Send the file as multipart/form-data, in the form field `file`.');
  const part = await request.file({ limits: { fileSize: options.maxBytes, files: 1 } }).catch((error: unknown) => {
    throw unreadableBody(error);
  });
  if (!part || part.fieldname !== 'file') {
    part?.file.resume();
    throw new ValidationRefusal([
      {
        loc: ['body', 'file'],
        msg: 'Send the file in the multipart form field `file`',
        type: 'missing',
        input: part?.fieldname ?? {},
      },
    ]);
  }
  let content: Buffer;
  try {
    content = await part.toBuffer();
  } catch (error) {
    if ((error as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE') {
      const limit = bytesLabel(options.maxBytes);
      throw new ApiError(
        'payload_too_large',
        `${options.what} is at most ${limit}${limit.endsWith(' bytes') ? '' : ` (${options.maxBytes} bytes)`}; this file is larger.`,
      );
    }
    throw unreadableBody(error);
  }
  const filename = (cleanText(part.filename ?? '').trim() || options.fallbackName).slice(0, 255);
  return { filename, mimetype: part.mimetype, content };
}
