/** Installs the Temporal binaries the tests need before vitest starts (npm test runs this). */
import { resolveToolOrExit, temporalCli, temporalTestServer } from './tools.js';

resolveToolOrExit(temporalCli);
resolveToolOrExit(temporalTestServer);
