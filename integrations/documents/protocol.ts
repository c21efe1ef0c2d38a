/** The messages between the document extractor (extractor.ts) and its worker thread (extract-worker.ts). */
import type { AttachmentKind } from '../../domain/assistant/attachments.js';

export interface ExtractJob {
  id: number;
  kind: AttachmentKind;
  /** The file, transferred (the sender's copy is detached). */
  bytes: ArrayBuffer;
}

export type WorkerMessage =
  | { type: 'ready' }
  | { type: 'done'; id: number; pages: string[]; peakHeapBytes: number }
  | { type: 'refused'; id: number; reason: string };
