// Original file: proto/maka/broker/v1/broker.proto


export interface CallToolRequest {
  'session_id'?: (string);
  'turn_id'?: (string);
  'tool_use_id'?: (string);
  'tool_name'?: (string);
  'arguments_json'?: (string);
  'call_id'?: (string);
  'skip_argument_validation'?: (boolean);
}

export interface CallToolRequest__Output {
  'session_id': (string);
  'turn_id': (string);
  'tool_use_id': (string);
  'tool_name': (string);
  'arguments_json': (string);
  'call_id': (string);
  'skip_argument_validation': (boolean);
}
