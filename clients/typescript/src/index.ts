export { SoundingClient, InquirySession, type CallOptions, type ClientOptions, type Document } from "./client.js";
export { SoundingError, type FieldViolation } from "./errors.js";
export { ToolUseObserver, type ObserverOptions } from "./observer.js";
export { checked } from "./validation.js";
export * from "./gen/sounding/v1/common_pb.js";
export * from "./gen/sounding/v1/corpus_pb.js";
export * from "./gen/sounding/v1/sounding_pb.js";
export * from "./gen/sounding/v1/tools_pb.js";
export { Code } from "@connectrpc/connect";
