// The worker thread's entry. The service runs its TypeScript through tsx, whose loader a worker
// thread does not inherit, so the thread registers it for itself. tsx turns on Node's source-map
// support, which would parse pdfjs's own multi-megabyte maps into the thread's heap (70 MB of
// the 256 allowed); the thread keeps it off.
import { register } from 'tsx/esm/api';

register();
process.setSourceMapsEnabled(false);
await import('./extract-worker.ts');
