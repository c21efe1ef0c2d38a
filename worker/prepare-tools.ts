/** Installs the Temporal binaries the tests need before vitest starts (npm test runs this). */
import { resolveStripeMock, resolveToolOrExit, temporalCli, temporalTestServer, ToolMissingError } from './tools.js';

resolveToolOrExit(temporalCli);
resolveToolOrExit(temporalTestServer);
try {
  resolveStripeMock();
} catch (error) {
  if (!(error instanceof ToolMissingError)) throw error;
  process.stderr.write(`\n${error.message}\n\n`);
  process.exit(1);
}
