// Maka Runtime client for TypeScript / Node.js on @grpc/grpc-js (docs/clients.md).
// Callers use BrokerClient (callTool with keepalive-aware automatic reattach, stop, listTools,
// watchCall, hosts); surfaces use SurfaceClient (attach, pending, answer, listHistory).

export { BrokerClient, DEFAULT_REATTACH, POOL_SERVICE_CONFIG, ToolCall, isPoolTarget, poolMembers } from "./broker.js";
export type {
  BrokerClientOptions,
  CallOptions,
  HostState,
  HostStatus,
  PoolMember,
  ReattachPolicy,
  StopOptions,
  ToolInfo,
} from "./broker.js";
export { MakaError } from "./errors.js";
export type {
  Accepted,
  Action,
  AwaitingInteraction,
  CallEvent,
  Failure,
  InteractionSettled,
  Lost,
  Outcome,
  Progress,
  Reattaching,
  Result,
  Status,
  Stopped,
} from "./events.js";
export type { ClientOptions, TlsOptions } from "./grpc.js";
export { tlsFromEnv } from "./grpc.js";
export { SurfaceClient } from "./surface.js";
export type {
  AnsweredBy,
  AnswerValue,
  Form,
  FormEvent,
  FormField,
  HistoryEntry,
  HistoryPage,
  Requester,
} from "./surface.js";
