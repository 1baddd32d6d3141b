import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** A request field that was wrong, and why. */
export interface FieldViolation {
  field: string;
  description: string;
}

const ERROR_INFO = "google.rpc.ErrorInfo";
const BAD_REQUEST = "google.rpc.BadRequest";

/**
 * A failed call: the gRPC status code, the message, and the google.rpc details the server
 * attached (the ErrorInfo reason and metadata, the BadRequest field violations).
 */
export class SoundingError extends Error {
  constructor(
    readonly code: Code,
    message: string,
    readonly reason = "",
    readonly metadata: Record<string, string> = {},
    readonly violations: FieldViolation[] = [],
  ) {
    super(`${Code[code]}${reason ? ` (${reason})` : ""}: ${message}`);
    this.name = "SoundingError";
  }

  /** The status code's name as gRPC spells it, e.g. "INVALID_ARGUMENT". */
  get codeName(): string {
    return Code[this.code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
  }

  /** The fields of the violations, in order. */
  get fields(): string[] {
    return this.violations.map((v) => v.field);
  }

  /** Any failure of a call as a SoundingError (an aborted call is CANCELED). */
  static from(error: unknown): SoundingError {
    if (error instanceof SoundingError) return error;
    const failure = ConnectError.from(error);
    let reason = "";
    let metadata: Record<string, string> = {};
    let violations: FieldViolation[] = [];
    for (const detail of failure.details) {
      if (!("type" in detail)) continue;
      if (detail.type === ERROR_INFO) [reason, metadata] = decodeErrorInfo(detail.value);
      if (detail.type === BAD_REQUEST) violations = decodeBadRequest(detail.value);
    }
    return new SoundingError(failure.code, failure.rawMessage, reason, metadata, violations);
  }
}

// The two detail messages, read off the wire (google/rpc/error_details.proto): ErrorInfo is
// {1: reason, 2: domain, 3: map<string, string> metadata}; BadRequest is
// {1: repeated FieldViolation {1: field, 2: description}}.

function fields(bytes: Uint8Array, each: (field: number, reader: BinaryReader, wireType: WireType) => boolean): void {
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (!each(field, reader, wireType)) reader.skip(wireType);
  }
}

function pair(bytes: Uint8Array): [string, string] {
  const found: [string, string] = ["", ""];
  fields(bytes, (field, reader, wireType) => {
    if (wireType !== WireType.LengthDelimited || (field !== 1 && field !== 2)) return false;
    found[field - 1] = reader.string();
    return true;
  });
  return found;
}

function decodeErrorInfo(bytes: Uint8Array): [string, Record<string, string>] {
  let reason = "";
  const metadata: Record<string, string> = {};
  fields(bytes, (field, reader, wireType) => {
    if (wireType !== WireType.LengthDelimited) return false;
    if (field === 1) reason = reader.string();
    else if (field === 3) {
      const [key, value] = pair(reader.bytes());
      metadata[key] = value;
    } else return false;
    return true;
  });
  return [reason, metadata];
}

function decodeBadRequest(bytes: Uint8Array): FieldViolation[] {
  const violations: FieldViolation[] = [];
  fields(bytes, (field, reader, wireType) => {
    if (field !== 1 || wireType !== WireType.LengthDelimited) return false;
    const [name, description] = pair(reader.bytes());
    violations.push({ field: name, description });
    return true;
  });
  return violations;
}
