// The contract's closed vocabularies, for the services that enforce them and the API reference that
// lists them.

/** The marker icon tokens (spec "Timeline marker"); nothing else is an icon. */
export const MARKER_ICONS = [
  "swords",
  "skull",
  "shield",
  "pickaxe",
  "blast",
  "flask",
  "user-plus",
  "bookmark",
  "flag",
  "sparkles",
  "hammer",
  "star",
  "trophy",
  "bed",
  "diamond",
] as const;

/** The eight webhook event names (spec "Events"): the vocabulary is complete. */
export const WEBHOOK_EVENTS = [
  "collection.finalized",
  "collection.released",
  "collection.revoked",
  "asset.processing",
  "asset.ready",
  "asset.failed",
  "asset.expired",
  "asset.deleted",
] as const;
