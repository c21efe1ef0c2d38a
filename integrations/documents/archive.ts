/**
 * The zip check an XLSX passes before anything opens it: the central directory is read first,
 * and the archive is refused on its declared entry count, total uncompressed size or any entry's
 * compression ratio (a zip bomb), or on an encrypted entry, without inflating a byte. Then every
 * entry is inflated once through yauzl, which stops the moment an entry yields more than it
 * declared, so the sizes judged are the real ones.
 */
import type { Readable } from 'node:stream';
import yauzl from 'yauzl';
import { archiveLimits, bytesLabel } from '../../domain/assistant/attachments.js';
import { ExtractionRefused } from './refusal.js';

export type ArchiveLimits = typeof archiveLimits;

/** What the check found: the entries' names, their declared total, and the bytes of the entries asked for. */
export interface CheckedArchive {
  entries: string[];
  uncompressedBytes: number;
  kept: Map<string, Buffer>;
}

function damaged(error: unknown): ExtractionRefused {
  return new ExtractionRefused(`The archive is damaged: ${(error as Error).message ?? String(error)}.`);
}

/** `keep`: entries whose inflated bytes the caller wants (read while checking, not inflated again). */
export async function checkArchive(
  bytes: Buffer,
  limits: ArchiveLimits = archiveLimits,
  keep: readonly string[] = [],
): Promise<CheckedArchive> {
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromBufferPromise(bytes, {
      lazyEntries: true,
      validateEntrySizes: true,
      strictFileNames: false,
      autoClose: false,
    });
  } catch (error) {
    throw damaged(error);
  }
  try {
    if (zip.entryCount > limits.entriesMax) {
      throw new ExtractionRefused(
        `The archive holds ${zip.entryCount} entries, more than the ${limits.entriesMax} allowed; it is not read.`,
      );
    }
    const entries: yauzl.Entry[] = [];
    let total = 0;
    try {
      for await (const entry of zip.eachEntry()) {
        if (entry.isEncrypted())
          throw new ExtractionRefused(
            'The workbook is encrypted (password-protected); save it without a password and upload it again.',
          );
        total += entry.uncompressedSize;
        if (total > limits.uncompressedBytesMax) {
          throw new ExtractionRefused(
            `The archive unpacks to more than ${bytesLabel(limits.uncompressedBytesMax)}; it is not read (a zip bomb, or too large).`,
          );
        }
        const compressed = Math.max(1, entry.compressedSize);
        if (entry.uncompressedSize > limits.ratioFloorBytes && entry.uncompressedSize / compressed > limits.ratioMax) {
          throw new ExtractionRefused(
            `The archive entry ${entry.fileName} unpacks ${Math.round(entry.uncompressedSize / compressed)} times its size, more than ${limits.ratioMax}; it is not read (a zip bomb).`,
          );
        }
        entries.push(entry);
      }
    } catch (error) {
      throw error instanceof ExtractionRefused ? error : damaged(error);
    }
    // The declared sizes passed; inflating checks they are true (yauzl fails an entry that yields
    // more or fewer bytes than declared, or whose compression method it cannot read).
    const kept = new Map<string, Buffer>();
    for (const entry of entries) {
      const chunks: Buffer[] | null = keep.includes(entry.fileName) ? [] : null;
      try {
        const stream = await zip.openReadStreamPromise(entry);
        for await (const chunk of stream) chunks?.push(chunk as Buffer);
      } catch (error) {
        throw damaged(error);
      }
      if (chunks) kept.set(entry.fileName, Buffer.concat(chunks));
    }
    return { entries: entries.map((e) => e.fileName), uncompressedBytes: total, kept };
  } finally {
    zip.close();
  }
}

/** A checked archive's entries, each inflated again on demand and streamed, in any order. */
export interface ArchiveEntries {
  /** The entries' names, each once. */
  names: string[];
  /** Whether an entry has that name, matched without regard to case (as OOXML matches part names). */
  has(name: string): boolean;
  open(name: string): Promise<Readable>;
  close(): void;
}

/**
 * Opens an archive that passed `checkArchive` for reading by name: yauzl reads each entry from the
 * central directory, so none depends on a streaming reader finding its local header.
 */
export async function openArchive(bytes: Buffer): Promise<ArchiveEntries> {
  let zip: yauzl.ZipFile;
  const byName = new Map<string, yauzl.Entry>();
  try {
    zip = await yauzl.fromBufferPromise(bytes, {
      lazyEntries: true,
      validateEntrySizes: true,
      strictFileNames: false,
      autoClose: false,
    });
    for await (const entry of zip.eachEntry()) {
      const name = entry.fileName.toLowerCase();
      if (!byName.has(name)) byName.set(name, entry);
    }
  } catch (error) {
    throw damaged(error);
  }
  return {
    names: [...byName.values()].map((entry) => entry.fileName),
    has: (name) => byName.has(name.toLowerCase()),
    async open(name) {
      const entry = byName.get(name.toLowerCase());
      if (entry === undefined) throw new ExtractionRefused(`The archive has no entry ${name}.`);
      try {
        return await zip.openReadStreamPromise(entry);
      } catch (error) {
        throw damaged(error);
      }
    },
    close: () => zip.close(),
  };
}
