import type { TestProject } from "vitest/node";
import { provideResources, runResources, testReceivers } from "./test-resources.js";

/**
 * The integration and slow layers' global setup: NATS, the database templates and the receivers'
 * ports, and no shared system (their files start what they need themselves).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [resources, receivers] = await Promise.all([runResources(), testReceivers()]);
  provideResources(project, { ...resources, webhookReceiver: receivers.webhookReceiver });
  return async () => {
    await resources.release();
    await receivers.stop();
  };
}
