// Original file: proto/maka/form/v1/form.proto

export const StringFormat = {
  STRING_FORMAT_UNSPECIFIED: 'STRING_FORMAT_UNSPECIFIED',
  STRING_FORMAT_EMAIL: 'STRING_FORMAT_EMAIL',
  STRING_FORMAT_URI: 'STRING_FORMAT_URI',
  STRING_FORMAT_DATE: 'STRING_FORMAT_DATE',
  STRING_FORMAT_DATE_TIME: 'STRING_FORMAT_DATE_TIME',
} as const;

export type StringFormat =
  | 'STRING_FORMAT_UNSPECIFIED'
  | 0
  | 'STRING_FORMAT_EMAIL'
  | 1
  | 'STRING_FORMAT_URI'
  | 2
  | 'STRING_FORMAT_DATE'
  | 3
  | 'STRING_FORMAT_DATE_TIME'
  | 4

export type StringFormat__Output = typeof StringFormat[keyof typeof StringFormat]
