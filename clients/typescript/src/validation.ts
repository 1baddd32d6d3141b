import { create, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { pathToString } from "@bufbuild/protobuf/reflect";
import { Code } from "@connectrpc/connect";
import { createValidator } from "@bufbuild/protovalidate";
import { SoundingError, type FieldViolation } from "./errors.js";

const validator = createValidator();

/**
 * The request, checked against the rules its proto declares (buf.validate: lengths, patterns,
 * ranges, defined enum values, unique items) before it is sent, as the server checks it: one that
 * breaks a rule throws the SoundingError the server would answer (INVALID_ARGUMENT, the violated
 * fields named as the server names them). The limits a deployment configures are the server's.
 */
export function checked<Desc extends DescMessage>(schema: Desc, init: MessageInitShape<Desc>): MessageShape<Desc> {
  const message = create(schema, init);
  const result = validator.validate(schema, message);
  if (result.kind === "error") throw result.error;
  if (result.kind === "invalid") {
    const byField = new Map<string, string[]>();
    for (const violation of result.error.violations) {
      const field = pathToString(violation.field);
      byField.set(field, [...(byField.get(field) ?? []), violation.message]);
    }
    const violations: FieldViolation[] = [...byField].map(([field, descriptions]) => ({
      field,
      description: descriptions.join(" and "),
    }));
    const message = violations.map((v) => `${v.field}: ${v.description}`).join("; ");
    throw new SoundingError(Code.InvalidArgument, message, "INVALID_ARGUMENT", { field: violations[0].field }, violations);
  }
  return message;
}
