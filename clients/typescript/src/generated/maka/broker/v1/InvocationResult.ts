// Original file: proto/maka/broker/v1/broker.proto


export interface InvocationResult {
  'invocation_id'?: (string);
  'call_tool_result_json'?: (string);
}

export interface InvocationResult__Output {
  'invocation_id': (string);
  'call_tool_result_json': (string);
}
