/**
 * A business-context document's text, by kind: PDFs through the chat attachments' extractor (a
 * worker thread with time and memory limits), Word documents through mammoth after the zip check
 * the extractor applies to workbooks, HTML through the page reader's readable text, Markdown and
 * plain text as they are. A file that cannot be read throws `DocumentUnreadable` with what to do.
 */
import mammoth from 'mammoth';
import { normaliseText, type DocumentKind } from '../../domain/documents/documents.js';
import { checkArchive } from '../../integrations/documents/archive.js';
import { ExtractionRefused, type DocumentExtractor } from '../../integrations/documents/extractor.js';
import { readableText } from '../../integrations/web/readable-text.js';

export class DocumentUnreadable extends Error {
  override name = 'DocumentUnreadable';
}

export interface ReadText {
  text: string;
  /** What was read, for the step's detail (e.g. "PDF, 3 pages"). */
  detail: string;
}

function decodeText(bytes: Buffer): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes).replace(/^\uFEFF/, '');
  } catch {
    return new TextDecoder('windows-1252').decode(bytes);
  }
}

export async function readDocumentText(
  kind: DocumentKind,
  bytes: Buffer,
  extractor: DocumentExtractor,
): Promise<ReadText> {
  switch (kind) {
    case 'pdf': {
      let pages: string[];
      try {
        pages = (await extractor.extract('pdf', bytes)).pages;
      } catch (error) {
        if (error instanceof ExtractionRefused) {
          throw new DocumentUnreadable(
            `The PDF could not be read: ${error.message} Upload an undamaged copy without a password.`,
          );
        }
        throw error;
      }
      return {
        text: normaliseText(pages.join('\n\n')),
        detail: `PDF, ${pages.length} page${pages.length === 1 ? '' : 's'}`,
      };
    }
    case 'docx': {
      try {
        await checkArchive(bytes);
      } catch (error) {
        if (error instanceof ExtractionRefused) {
          throw new DocumentUnreadable(
            `The Word document could not be read: ${error.message.replace('workbook', 'document')} Save it again as .docx and upload it.`,
          );
        }
        throw error;
      }
      let value: string;
      try {
        ({ value } = await mammoth.extractRawText({ buffer: bytes }));
      } catch (error) {
        throw new DocumentUnreadable(
          `The Word document could not be read (${(error as Error).message}). Save it again as .docx and upload it.`,
        );
      }
      return { text: normaliseText(value), detail: 'Word document' };
    }
    case 'html': {
      const page = readableText(decodeText(bytes));
      const text = [page.title, page.description, page.text].filter(Boolean).join('\n\n');
      return { text: normaliseText(text), detail: 'HTML page, readable text' };
    }
    case 'markdown':
      return { text: normaliseText(decodeText(bytes)), detail: 'Markdown' };
    case 'text':
      return { text: normaliseText(decodeText(bytes)), detail: 'plain text' };
  }
}
