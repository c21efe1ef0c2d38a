/**
 * Builds the Temporal server that TEMPORAL_PERSISTENCE=postgres runs (once, into `.tools/`), so the
 * five-minute build can happen ahead of the first `npm start` in that mode: `npm run build:temporal-server`.
 */
import { resolveTemporalServer } from './temporal-postgres.js';
import { ToolMissingError } from './tools.js';

try {
  const build = resolveTemporalServer((line) => process.stdout.write(`${line}\n`));
  process.stdout.write(`The Temporal server is at ${build.server}\n`);
} catch (error) {
  if (!(error instanceof ToolMissingError)) throw error;
  process.stderr.write(`\n${error.message}\n\n`);
  process.exit(1);
}
