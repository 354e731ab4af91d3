// Original file: proto/maka/broker/v1/broker.proto


export interface ReportServersResponse {
}

export interface ReportServersResponse__Output {
}
