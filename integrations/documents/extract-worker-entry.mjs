// The extractor's reader process starts here (integrations/documents/extractor.ts).
//
// 1. pdfjs is loaded first, natively: through tsx's loader its 4 MB of JavaScript takes a second
//    longer to load. Once loaded, the TypeScript below gets the same module from the cache.
// 2. The legacy build's core-js replaces Array.prototype.push with a polyfill that only fixes an
//    edge case of arrays with a read-only length (Node 20's V8 gets it wrong; nothing here relies
//    on it) and costs a fifth of a page's time: the native one is put back. The process runs only
//    the reader, so nothing else sees either.
// 3. The service runs its TypeScript through tsx, whose loader the reader is not started with,
//    so it registers it for itself. tsx turns on Node's source-map support, which would parse
//    pdfjs's own multi-megabyte maps into the reader's heap; the reader keeps it off.
import { register } from 'tsx/esm/api';

const nativePush = Array.prototype.push;
await import('pdfjs-dist/legacy/build/pdf.mjs');
globalThis.pdfjsWorker = await import('pdfjs-dist/legacy/build/pdf.worker.mjs');
if (Array.prototype.push !== nativePush) {
  Object.defineProperty(Array.prototype, 'push', {
    value: nativePush,
    writable: true,
    configurable: true,
    enumerable: false,
  });
}

register();
process.setSourceMapsEnabled(false);
await import('./extract-worker.ts');
