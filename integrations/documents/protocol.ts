/** The messages between the document extractor (extractor.ts) and its reader process (extract-worker.ts), over IPC with advanced serialization. */
import type { AttachmentKind } from '../../domain/assistant/attachments.js';

export interface ExtractJob {
  id: number;
  kind: AttachmentKind;
  /** The file (copied into the reader). */
  bytes: Uint8Array;
}

export type ReaderMessage =
  | { type: 'ready' }
  | { type: 'done'; id: number; pages: string[]; peakHeapBytes: number }
  | { type: 'refused'; id: number; reason: string };
