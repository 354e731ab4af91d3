// Original file: proto/maka/broker/v1/broker.proto


export interface CallResult {
  'call_tool_result_json'?: (string);
  'is_error'?: (boolean);
}

export interface CallResult__Output {
  'call_tool_result_json': (string);
  'is_error': (boolean);
}
