// Original file: proto/maka/broker/v1/broker.proto


export interface Tool {
  'qualified_name'?: (string);
  'description'?: (string);
  'input_schema_json'?: (string);
  'provider_id'?: (string);
  'provider_display_name'?: (string);
  'output_schema_json'?: (string);
  'title'?: (string);
  'annotations_json'?: (string);
}

export interface Tool__Output {
  'qualified_name': (string);
  'description': (string);
  'input_schema_json': (string);
  'provider_id': (string);
  'provider_display_name': (string);
  'output_schema_json': (string);
  'title': (string);
  'annotations_json': (string);
}
