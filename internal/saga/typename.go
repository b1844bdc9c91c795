package saga

// typeName names a CEL type (its TypeName: "int", "map",
// "google.protobuf.Timestamp") in the definition language's words, with
// its article ("an int", "a map", "a timestamp", "null"): what a user
// reads in a problem or a failure, never CEL's or Go's spelling.
func typeName(celName string) string {
	switch celName {
	case "int", "uint":
		return "an " + celName
	case "bool", "double", "string", "list", "map":
		return "a " + celName
	case "bytes":
		return "bytes"
	case "null_type":
		return "null"
	case "google.protobuf.Timestamp":
		return "a timestamp"
	case "google.protobuf.Duration":
		return "a duration"
	case "dyn":
		return "a value of any type"
	case "optional_type":
		return "an optional"
	case "type":
		return "a type"
	}
	return "a " + celName
}
