package sounding

import (
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FieldViolation names a request field that was wrong, and why.
type FieldViolation struct {
	Field, Description string
}

// Error is a failed call: the gRPC code, the message, and the google.rpc details the server
// attached (the ErrorInfo reason and metadata, the BadRequest field violations).
type Error struct {
	Code       codes.Code
	Message    string
	Reason     string
	Metadata   map[string]string
	Violations []FieldViolation
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Reason, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Fields names the fields of the violations, in order.
func (e *Error) Fields() []string {
	fields := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		fields[i] = v.Field
	}
	return fields
}

// asError turns a gRPC failure into an *Error (nil stays nil; other errors pass through).
func asError(err error) error {
	if err == nil {
		return nil
	}
	failure, ok := status.FromError(err)
	if !ok {
		return err
	}
	converted := &Error{Code: failure.Code(), Message: failure.Message()}
	for _, detail := range failure.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			converted.Reason, converted.Metadata = d.Reason, d.Metadata
		case *errdetails.BadRequest:
			for _, v := range d.FieldViolations {
				converted.Violations = append(converted.Violations, FieldViolation{v.Field, v.Description})
			}
		}
	}
	return converted
}
