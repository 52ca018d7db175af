import { randomBytes } from "node:crypto";
import { createSecretBox } from "./box.js";

/** A secret box under a key of the test run's own: seals as the services do, and opens what it sealed or never sealed. */
export const openSecrets = createSecretBox(randomBytes(32));
