// Original file: proto/maka/broker/v1/broker.proto


export interface ToolDescriptor {
  'name'?: (string);
  'description'?: (string);
  'input_schema_json'?: (string);
  'claimed_server'?: (string);
  'output_schema_json'?: (string);
  'title'?: (string);
  'annotations_json'?: (string);
}

export interface ToolDescriptor__Output {
  'name': (string);
  'description': (string);
  'input_schema_json': (string);
  'claimed_server': (string);
  'output_schema_json': (string);
  'title': (string);
  'annotations_json': (string);
}
