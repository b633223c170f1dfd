// The node agent's public surface: its activities, its worker, and the clean-up of the services
// it started. Everything else under src/agent/ is the providers' business.
export { createAgentActivities } from './activities';
export { runAgents, type RunAgentsOptions, type RunningAgents } from './worker';
export { stopServices } from './services';
export { loadAgentConfig } from './config';
