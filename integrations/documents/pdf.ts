/**
 * PDF pages as text: pdfjs-dist's legacy build (the one pdf.js ships for Node) gives each run of
 * text with its transform; the domain's layout rule turns a page's runs into lines. Pages are
 * read a few at a time (pdfjs works on the same thread here, so this only overlaps its message
 * round trips) and each page's resources are released once its text is out, so memory stays flat
 * in the page count. A page that fails says so in its text; a file that fails is refused.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { layoutPage, unreadablePageText, type PositionedText } from '../../domain/assistant/attachments.js';
import { ExtractionRefused } from './refusal.js';

const pdfjsRoot = dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json'));
/** Character maps (CJK fonts) and the standard fonts' data, read from the package's own folders. */
const cMapUrl = join(pdfjsRoot, 'cmaps') + '/';
const standardFontDataUrl = join(pdfjsRoot, 'standard_fonts') + '/';
/** The module pdfjs would import on the first document (it has no type declarations of its own). */
const pdfjsWorkerModule: string = 'pdfjs-dist/legacy/build/pdf.worker.mjs';
/** Pages in flight at once. */
const pageWindow = 8;
/** Pages between two releases of the document's caches (fonts, images, parsed objects). */
const cleanupEvery = 200;

type Pdfjs = typeof import('pdfjs-dist/legacy/build/pdf.mjs');
let pdfjs: Pdfjs | undefined;

/**
 * pdfjs and the "worker" it runs on this same thread in Node, loaded once. The extractor's thread
 * has loaded both before this module (extract-worker-entry.mjs says why), so here they come from
 * the module cache.
 */
export async function warmUpPdf(): Promise<Pdfjs> {
  if (pdfjs) return pdfjs;
  const loaded = await import('pdfjs-dist/legacy/build/pdf.mjs');
  (globalThis as { pdfjsWorker?: unknown }).pdfjsWorker ??= await import(pdfjsWorkerModule);
  pdfjs = loaded;
  return loaded;
}

function refusalOf(error: unknown): ExtractionRefused {
  const name = (error as { name?: string }).name;
  const message = String((error as { message?: string }).message ?? error).replace(/\.$/, '');
  if (name === 'PasswordException')
    return new ExtractionRefused(
      'The PDF is password-protected (encrypted); save it without a password and upload it again.',
    );
  if (name === 'InvalidPDFException')
    return new ExtractionRefused(`The PDF is damaged or truncated and cannot be read (${message}).`);
  return new ExtractionRefused(`The PDF cannot be read (${message}).`);
}

interface TextRun {
  str: string;
  transform: number[];
  width: number;
}

const isTextRun = (item: unknown): item is TextRun =>
  typeof (item as TextRun).str === 'string' && Array.isArray((item as TextRun).transform);

export interface PdfProgress {
  /** Called after each page, in page order. */
  onPage?: () => void;
}

export async function extractPdf(bytes: Uint8Array, progress: PdfProgress = {}): Promise<string[]> {
  const { getDocument, Util } = await warmUpPdf();
  const task = getDocument({
    data: bytes,
    cMapUrl,
    cMapPacked: true,
    standardFontDataUrl,
    disableFontFace: true,
    useSystemFonts: false,
    isOffscreenCanvasSupported: false,
    stopAtErrors: false,
    verbosity: 0,
  });
  let pdf;
  try {
    pdf = await task.promise;
  } catch (error) {
    await task.destroy().catch(() => undefined);
    throw refusalOf(error);
  }
  try {
    const pages = new Array<string>(pdf.numPages);
    const readPage = async (n: number): Promise<string> => {
      try {
        const page = await pdf.getPage(n);
        try {
          const viewport = page.getViewport({ scale: 1 });
          const content = await page.getTextContent({ disableNormalization: true });
          const runs: PositionedText[] = [];
          for (const item of content.items) {
            if (!isTextRun(item) || item.str === '') continue;
            // Into the page's own coordinates (its rotation applied, y growing downward).
            const [, , c, d, x, y] = Util.transform(viewport.transform, item.transform) as number[];
            runs.push({ text: item.str, x: x!, y: y!, width: item.width * viewport.scale, size: Math.hypot(c!, d!) });
          }
          return layoutPage(runs);
        } finally {
          page.cleanup();
        }
      } catch (error) {
        return unreadablePageText(n, String((error as Error)?.message ?? error));
      }
    };
    for (let first = 1; first <= pdf.numPages; first += pageWindow) {
      const batch: Promise<string>[] = [];
      for (let n = first; n < first + pageWindow && n <= pdf.numPages; n += 1) batch.push(readPage(n));
      const texts = await Promise.all(batch);
      texts.forEach((text, i) => {
        pages[first - 1 + i] = text;
        progress.onPage?.();
      });
      if ((first - 1 + pageWindow) % cleanupEvery === 0) await pdf.cleanup();
    }
    return pages;
  } finally {
    // pdf.js 6 ends a document through its loading task (the proxy has no destroy of its own).
    await task.destroy().catch(() => undefined);
  }
}
