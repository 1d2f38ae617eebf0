//! A tool's parameters: seed 003's typed list (or a raw JSON Schema object), the JSON Schema a
//! model sees, and validation of the arguments a model sends.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::diag::{Sink, child, did_you_mean};
use crate::error::{ErrorCode, ToolError};
use crate::reader::{Obj, type_name};

/// The types seed 003 defines for a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
    /// An RFC 3339 date-time, carried as a string.
    Datetime,
}

const TYPE_NAMES: [&str; 7] = [
    "string", "integer", "number", "boolean", "array", "object", "datetime",
];

impl ParamType {
    fn parse(s: &str) -> Option<ParamType> {
        Some(match s {
            "string" => ParamType::String,
            "integer" => ParamType::Integer,
            "number" => ParamType::Number,
            "boolean" => ParamType::Boolean,
            "array" => ParamType::Array,
            "object" => ParamType::Object,
            "datetime" => ParamType::Datetime,
            _ => return None,
        })
    }

    /// Suggests a type for a common misspelling or another language's name for it.
    fn suggest(s: &str) -> Option<&'static str> {
        Some(match s.to_ascii_lowercase().as_str() {
            "str" | "text" => "string",
            "int" | "long" => "integer",
            "float" | "double" | "decimal" => "number",
            "bool" => "boolean",
            "list" => "array",
            "dict" | "map" => "object",
            "date" | "date-time" | "date_time" | "timestamp" | "time" => "datetime",
            other => return did_you_mean(other, TYPE_NAMES),
        })
    }

    /// The JSON Schema `type` keyword for this type.
    pub fn json_type(self) -> &'static str {
        match self {
            ParamType::String | ParamType::Datetime => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
            ParamType::Object => "object",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            ParamType::String | ParamType::Datetime => v.is_string(),
            ParamType::Integer => v.as_i64().is_some() || v.as_u64().is_some(),
            ParamType::Number => v.is_number(),
            ParamType::Boolean => v.is_boolean(),
            ParamType::Array => v.is_array(),
            ParamType::Object => v.is_object(),
        }
    }

    fn is_numeric(self) -> bool {
        matches!(self, ParamType::Integer | ParamType::Number)
    }
}

/// The shape of a value: a parameter's, or an array's items.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub ty: ParamType,
    pub description: Option<String>,
    pub enum_values: Option<Vec<Value>>,
    pub min_value: Option<f64>,
    pub max_value: Option<f64>,
    pub items: Option<Box<Shape>>,
}

/// One typed parameter (seed 003's `ActionParameter`).
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub shape: Shape,
    pub required: bool,
    pub default: Option<Value>,
}

/// A tool's parameters: a typed list, or a JSON Schema object given as is.
#[derive(Debug, Clone, PartialEq)]
pub enum Parameters {
    Typed(Vec<Parameter>),
    Schema(Value),
}

const PARAM_FIELDS: &[&str] = &[
    "name",
    "type",
    "description",
    "required",
    "default",
    "enum",
    "min_value",
    "max_value",
    "items",
];
const ITEM_FIELDS: &[&str] = &[
    "type",
    "description",
    "enum",
    "min_value",
    "max_value",
    "items",
];
const MAX_ITEM_DEPTH: usize = 4;

/// Parses the `parameters` field; every problem goes to `sink`.
pub(crate) fn parse(v: &Value, ptr: &str, max_parameters: usize, sink: &mut Sink) -> Parameters {
    match v {
        Value::Array(list) => {
            if list.len() > max_parameters {
                sink.error_fix(
                    ptr,
                    format!(
                        "{} parameters, over the limit of {max_parameters}",
                        list.len()
                    ),
                    "split the tool, or take an object parameter",
                );
            }
            let mut seen: BTreeMap<String, String> = BTreeMap::new();
            let mut out = Vec::with_capacity(list.len());
            for (i, item) in list.iter().enumerate() {
                let p = child(ptr, i);
                if let Some(param) = parse_parameter(item, &p, sink) {
                    if let Some(first) = seen.get(&param.name) {
                        sink.error_fix(
                            &child(&p, "name"),
                            format!(
                                "parameter `{}` is defined twice (first at {first})",
                                param.name
                            ),
                            "give each parameter its own name",
                        );
                    } else {
                        seen.insert(param.name.clone(), p.clone());
                    }
                    out.push(param);
                }
            }
            Parameters::Typed(out)
        }
        Value::Object(o) => {
            if o.get("type").and_then(Value::as_str) != Some("object") {
                sink.error_fix(ptr, "a JSON Schema for `parameters` must have `\"type\": \"object\"`", "add `\"type\": \"object\"` with `properties`, or give a list of typed parameters");
            } else if let Err(e) = jsonschema::options().should_validate_formats(true).build(v) {
                sink.error_fix(
                    &format!("{ptr}{}", e.instance_path()),
                    format!("`parameters` is not a valid JSON Schema: {e}"),
                    "fix the schema so it validates against JSON Schema draft 2020-12",
                );
            }
            Parameters::Schema(v.clone())
        }
        other => {
            sink.error_fix(
                ptr,
                format!(
                    "`parameters` must be a list of parameters or a JSON Schema object, found {}",
                    type_name(other)
                ),
                "write `[{\"name\": \"x\", \"type\": \"string\"}]`",
            );
            Parameters::Typed(Vec::new())
        }
    }
}

fn parse_parameter(v: &Value, ptr: &str, sink: &mut Sink) -> Option<Parameter> {
    let obj = Obj::new(v, ptr, "a parameter", PARAM_FIELDS, sink)?;
    let name = obj.req_str("name", sink);
    if let Some(n) = name
        && !valid_param_name(n)
    {
        sink.error_fix(
            &obj.at("name"),
            format!("parameter name `{n}` is not allowed"),
            "use 1-64 letters, digits or underscores, starting with a letter or underscore",
        );
    }
    let shape = parse_shape(&obj, 0, sink);
    let required = obj.bool("required", sink).unwrap_or(false);
    let default = obj.get("default").cloned();
    if let (Some(shape), Some(d)) = (&shape, &default) {
        check_value(shape, d, &obj.at("default"), "default", sink);
        if required {
            sink.error_fix(
                &obj.at("default"),
                "a required parameter's default is never used",
                "drop `\"required\": true` or the `default`",
            );
        }
    }
    obj.finish(sink);
    // A parameter whose type is wrong still declares its name, so templates that read it are
    // not reported as unknown too; the definition is rejected for the type anyway.
    let shape = shape.unwrap_or(Shape {
        ty: ParamType::String,
        description: None,
        enum_values: None,
        min_value: None,
        max_value: None,
        items: None,
    });
    Some(Parameter {
        name: name?.to_owned(),
        shape,
        required,
        default,
    })
}

fn valid_param_name(n: &str) -> bool {
    let mut chars = n.chars();
    n.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_shape(obj: &Obj<'_>, depth: usize, sink: &mut Sink) -> Option<Shape> {
    let ty = match obj.req_str("type", sink) {
        Some(t) => match ParamType::parse(t) {
            Some(ty) => Some(ty),
            None => {
                let fix = match ParamType::suggest(t) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("use one of {}", crate::reader::list(&TYPE_NAMES)),
                };
                sink.error_fix(
                    &obj.at("type"),
                    format!("unknown parameter type `{t}`"),
                    fix,
                );
                None
            }
        },
        None => None,
    };
    let description = obj.str("description", sink).map(str::to_owned);
    let min_value = obj.number("min_value", sink);
    let max_value = obj.number("max_value", sink);
    let enum_values = obj.array("enum", sink).cloned();
    let items = match obj.get("items") {
        Some(v) if depth >= MAX_ITEM_DEPTH => {
            let _ = v;
            sink.error_fix(
                &obj.at("items"),
                format!("`items` nest deeper than {MAX_ITEM_DEPTH} levels"),
                "flatten the parameter, or take an object",
            );
            None
        }
        Some(v) => Obj::new(v, &obj.at("items"), "`items`", ITEM_FIELDS, sink).and_then(|items| {
            let shape = parse_shape(&items, depth + 1, sink);
            items.finish(sink);
            shape.map(Box::new)
        }),
        None => None,
    };
    let ty = ty?;
    if (min_value.is_some() || max_value.is_some()) && !ty.is_numeric() {
        let key = if min_value.is_some() {
            "min_value"
        } else {
            "max_value"
        };
        sink.error_fix(
            &obj.at(key),
            format!(
                "`{key}` applies to integer and number parameters, not {}",
                TYPE_NAMES[ty as usize]
            ),
            "remove it, or change the type",
        );
    }
    if let (Some(lo), Some(hi)) = (min_value, max_value)
        && lo > hi
    {
        sink.error_fix(
            &obj.at("min_value"),
            format!("min_value {lo} is greater than max_value {hi}"),
            "swap them, or fix one of the bounds",
        );
    }
    if obj.get("items").is_some() && ty != ParamType::Array {
        sink.error_fix(
            &obj.at("items"),
            "`items` applies to array parameters only",
            "remove `items`, or set `\"type\": \"array\"`",
        );
    }
    let shape = Shape {
        ty,
        description,
        enum_values: None,
        min_value,
        max_value,
        items,
    };
    let enum_values =
        enum_values.filter(|values| check_enum(&shape, values, &obj.at("enum"), sink));
    Some(Shape {
        enum_values,
        ..shape
    })
}

fn check_enum(shape: &Shape, values: &[Value], ptr: &str, sink: &mut Sink) -> bool {
    if values.is_empty() {
        sink.error_fix(
            ptr,
            "`enum` is empty, so no value would be accepted",
            "list the allowed values, or remove `enum`",
        );
        return false;
    }
    let mut ok = true;
    for (i, v) in values.iter().enumerate() {
        if !shape.ty.accepts(v) {
            sink.error_fix(
                &child(ptr, i),
                format!("enum value {v} is not {}", TYPE_NAMES[shape.ty as usize]),
                "make every enum value match the parameter's type",
            );
            ok = false;
        } else if values[..i].contains(v) {
            sink.error_fix(
                &child(ptr, i),
                format!("enum value {v} is listed twice"),
                "remove the repeat",
            );
            ok = false;
        }
    }
    ok
}

/// Reports a value (a default) that the shape would reject.
fn check_value(shape: &Shape, v: &Value, ptr: &str, what: &str, sink: &mut Sink) {
    if !shape.ty.accepts(v) {
        sink.error_fix(
            ptr,
            format!("{what} {v} is not {}", TYPE_NAMES[shape.ty as usize]),
            format!("give a {what} of the parameter's type"),
        );
        return;
    }
    if let Some(values) = &shape.enum_values
        && !values.contains(v)
    {
        sink.error_fix(
            ptr,
            format!("{what} {v} is not one of the enum values"),
            "use one of the enum values",
        );
    }
    if let Some(n) = v.as_f64()
        && (shape.min_value.is_some_and(|lo| n < lo) || shape.max_value.is_some_and(|hi| n > hi))
    {
        sink.error_fix(
            ptr,
            format!("{what} {v} is outside min_value..max_value"),
            "use a value within the bounds",
        );
    }
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

fn shape_schema(shape: &Shape, nullable: bool) -> Map<String, Value> {
    let mut s = Map::new();
    let ty = shape.ty.json_type();
    s.insert(
        "type".into(),
        if nullable {
            json!([ty, "null"])
        } else {
            json!(ty)
        },
    );
    if let Some(d) = &shape.description {
        s.insert("description".into(), json!(d));
    }
    if shape.ty == ParamType::Datetime {
        s.insert("format".into(), json!("date-time"));
    }
    if let Some(values) = &shape.enum_values {
        let mut values = values.clone();
        if nullable {
            values.push(Value::Null);
        }
        s.insert("enum".into(), Value::Array(values));
    }
    if let Some(lo) = shape.min_value {
        s.insert("minimum".into(), number(lo));
    }
    if let Some(hi) = shape.max_value {
        s.insert("maximum".into(), number(hi));
    }
    if let Some(items) = &shape.items {
        s.insert("items".into(), Value::Object(shape_schema(items, false)));
    }
    s
}

impl Parameters {
    /// The JSON Schema of the arguments: defaults, bounds and `additionalProperties: false`.
    pub fn json_schema(&self) -> Value {
        match self {
            Parameters::Schema(s) => s.clone(),
            Parameters::Typed(params) => {
                let mut props = Map::new();
                let mut required = Vec::new();
                for p in params {
                    let mut s = shape_schema(&p.shape, false);
                    if let Some(d) = &p.default {
                        s.insert("default".into(), d.clone());
                    }
                    props.insert(p.name.clone(), Value::Object(s));
                    if p.required {
                        required.push(json!(p.name));
                    }
                }
                json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
            }
        }
    }

    /// The schema for OpenAI strict mode: every property required, optional ones nullable, and
    /// defaults told in the description (strict mode has no `default` keyword). `None` for a raw
    /// schema, which is used as given.
    pub fn strict_schema(&self) -> Option<Value> {
        let Parameters::Typed(params) = self else {
            return None;
        };
        let mut props = Map::new();
        for p in params {
            let mut s = shape_schema(&p.shape, !p.required);
            if let Some(d) = &p.default {
                let text = match s.get("description").and_then(Value::as_str) {
                    Some(desc) => format!("{desc} (default: {d})"),
                    None => format!("Default: {d}."),
                };
                s.insert("description".into(), json!(text));
            }
            props.insert(p.name.clone(), Value::Object(s));
        }
        let required: Vec<Value> = params.iter().map(|p| json!(p.name)).collect();
        Some(
            json!({"type": "object", "properties": props, "required": required, "additionalProperties": false}),
        )
    }

    /// Names of the declared parameters, when they are known.
    pub fn names(&self) -> Option<Vec<String>> {
        match self {
            Parameters::Typed(p) => Some(p.iter().map(|p| p.name.clone()).collect()),
            Parameters::Schema(s) => s
                .get("properties")
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect()),
        }
    }
}

/// Parses the arguments' text. An object (the usual case) is read straight into a map with
/// room for every declared parameter, so filling in the absent ones does not grow it.
fn parse_arguments(raw: &str, parameters: usize) -> Result<Value, serde_json::Error> {
    if !raw.trim_start().starts_with('{') {
        return serde_json::from_str(raw);
    }
    let mut de = serde_json::Deserializer::from_str(raw);
    let args = serde::de::DeserializeSeed::deserialize(ArgsObject(parameters), &mut de)?;
    de.end()?;
    Ok(Value::Object(args))
}

/// A JSON object read into a map made with room for `.0` entries.
struct ArgsObject(usize);

impl<'de> serde::de::DeserializeSeed<'de> for ArgsObject {
    type Value = Map<String, Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ArgsObject {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::with_capacity(self.0.max(map.size_hint().unwrap_or(0)));
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            out.insert(k, v);
        }
        Ok(out)
    }
}

/// Validates a model's arguments against a tool's schema, compiled once per tool version.
pub struct ArgValidator {
    validator: jsonschema::Validator,
    /// Optional parameters and their defaults (`Null` when none): absent ones are filled in.
    fill: Vec<(String, Value)>,
    optional: Vec<String>,
    names: Vec<String>,
}

impl std::fmt::Debug for ArgValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgValidator")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl ArgValidator {
    /// Compiles the validator; fails only for a schema that is not valid JSON Schema.
    pub fn new(params: &Parameters) -> Result<ArgValidator, String> {
        let schema = params.json_schema();
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| e.to_string())?;
        let (fill, optional, names) = match params {
            Parameters::Typed(list) => (
                list.iter()
                    .filter(|p| !p.required)
                    .map(|p| (p.name.clone(), p.default.clone().unwrap_or(Value::Null)))
                    .collect(),
                list.iter()
                    .filter(|p| !p.required)
                    .map(|p| p.name.clone())
                    .collect(),
                list.iter().map(|p| p.name.clone()).collect(),
            ),
            Parameters::Schema(s) => {
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let props = s.get("properties").and_then(Value::as_object);
                let fill = props
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| v.get("default").map(|d| (k.clone(), d.clone())))
                            .collect()
                    })
                    .unwrap_or_default();
                let optional = props
                    .map(|m| {
                        m.keys()
                            .filter(|k| !required.contains(&k.as_str()))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                (
                    fill,
                    optional,
                    props
                        .map(|m| m.keys().cloned().collect())
                        .unwrap_or_default(),
                )
            }
        };
        Ok(ArgValidator {
            validator,
            fill,
            optional,
            names,
        })
    }

    /// Parses and validates `arguments_json`, filling in defaults; every declared parameter of a
    /// typed list is present afterwards (`null` when optional, absent and without default).
    pub fn validate(&self, tool: &str, arguments_json: &str) -> Result<Value, ToolError> {
        let raw = if arguments_json.trim().is_empty() {
            "{}"
        } else {
            arguments_json
        };
        let parsed = parse_arguments(raw, self.names.len()).map_err(|e| {
            ToolError::new(ErrorCode::ToolArgsParseError, format!("The arguments for {tool} are not valid JSON ({e}). Send them as one JSON object."))
        })?;
        // Valid JSON that is not an object cannot be read as arguments at all: as seed 004's
        // executor does, it is a parse error, not a validation one.
        let Value::Object(mut args) = parsed else {
            return Err(ToolError::new(
                ErrorCode::ToolArgsParseError,
                format!(
                    "Tool arguments must be a JSON object; the arguments for {tool} are {}. Send them as one JSON object of the parameters by name.",
                    type_name(&parsed)
                ),
            ));
        };
        // Strict-mode models send `null` for an optional parameter they leave out.
        args.retain(|k, v| !(v.is_null() && self.optional.contains(k)));
        let args = Value::Object(args);
        let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
        // Collecting errors costs more than checking; valid arguments are the common case.
        let errors = if self.validator.is_valid(&args) {
            None
        } else {
            Some(self.validator.iter_errors(&args))
        };
        for err in errors.into_iter().flatten() {
            let path = err.instance_path().to_string();
            match err.kind() {
                jsonschema::error::ValidationErrorKind::Required { property } => {
                    let name = property.as_str().unwrap_or_default().to_owned();
                    problems
                        .entry(name)
                        .or_default()
                        .push("is required".to_owned());
                }
                jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                    for name in unexpected {
                        let hint = match did_you_mean(name, self.names.iter().map(String::as_str)) {
                            Some(s) => format!("is not a parameter of {tool}; did you mean `{s}`?"),
                            None => format!("is not a parameter of {tool}"),
                        };
                        problems.entry(name.clone()).or_default().push(hint);
                    }
                }
                _ => {
                    let name = path
                        .trim_start_matches('/')
                        .split('/')
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    let at = if path.matches('/').count() > 1 {
                        format!(" (at {path})")
                    } else {
                        String::new()
                    };
                    problems.entry(name).or_default().push(format!("{err}{at}"));
                }
            }
        }
        if !problems.is_empty() {
            let details: Vec<Value> = problems
                .iter()
                .map(|(p, errs)| json!({"parameter": p, "error": errs.join("; ")}))
                .collect();
            let summary: Vec<String> = problems
                .iter()
                .map(|(p, errs)| format!("`{p}` {}", errs.join("; ")))
                .collect();
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "Invalid arguments for {tool}: {}. Correct them and call again.",
                    summary.join("; ")
                ),
            )
            .with_details(Value::Array(details)));
        }
        let Value::Object(mut args) = args else {
            return Ok(args);
        };
        for (name, default) in &self.fill {
            if crate::field::get(&args, name).is_none() {
                args.insert(name.clone(), default.clone());
            }
        }
        Ok(Value::Object(args))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn params(v: Value) -> (Parameters, Vec<crate::diag::Diagnostic>) {
        let mut sink = Sink::default();
        let p = parse(&v, "/parameters", 64, &mut sink);
        (p, sink.items)
    }

    #[test]
    fn typed_parameters_become_a_schema() {
        let (p, diags) = params(json!([
            {"name": "meal_type", "type": "string", "enum": ["breakfast", "lunch"], "required": true},
            {"name": "when", "type": "datetime", "description": "When it was eaten"},
            {"name": "portions", "type": "integer", "min_value": 1, "max_value": 5, "default": 1},
            {"name": "dishes", "type": "array", "items": {"type": "string"}}
        ]));
        assert!(diags.is_empty(), "{diags:?}");
        insta::assert_json_snapshot!(p.json_schema());
        insta::assert_json_snapshot!("strict", p.strict_schema().unwrap());
    }

    /// (parameters, pointer, message fragment) — one line per problem kind.
    #[test]
    fn parameter_problems_are_each_reported() {
        let cases = [
            (
                json!([{"name": "a", "type": "str"}]),
                "/parameters/0/type",
                "did you mean `string`?",
            ),
            (
                json!([{"name": "a b", "type": "string"}]),
                "/parameters/0/name",
                "not allowed",
            ),
            (
                json!([{"name": "a", "type": "string"}, {"name": "a", "type": "integer"}]),
                "/parameters/1/name",
                "defined twice",
            ),
            (
                json!([{"name": "a", "type": "integer", "enum": [1, "two"]}]),
                "/parameters/0/enum/1",
                "is not integer",
            ),
            (
                json!([{"name": "a", "type": "number", "min_value": 5, "max_value": 1}]),
                "/parameters/0/min_value",
                "greater than",
            ),
            (
                json!([{"name": "a", "type": "string", "min_value": 1}]),
                "/parameters/0/min_value",
                "applies to integer",
            ),
            (
                json!([{"name": "a", "type": "string", "enum": ["x"], "default": "y"}]),
                "/parameters/0/default",
                "not one of the enum",
            ),
            (
                json!([{"name": "a", "type": "string", "requird": true}]),
                "/parameters/0/requird",
                "did you mean `required`?",
            ),
            (
                json!([{"name": "a", "type": "string", "items": {"type": "string"}}]),
                "/parameters/0/items",
                "array parameters only",
            ),
            (
                json!({"type": "string"}),
                "/parameters",
                "\"type\": \"object\"",
            ),
            (json!("nope"), "/parameters", "must be a list"),
        ];
        for (v, ptr, needle) in cases {
            let (_, diags) = params(v.clone());
            assert!(
                diags.iter().any(|d| d.pointer == ptr
                    && (d.message.contains(needle)
                        || d.fix.as_deref().unwrap_or("").contains(needle))),
                "{v}: expected {ptr} ~ {needle}, got {diags:#?}"
            );
        }
    }

    #[test]
    fn several_problems_in_one_pass() {
        let (_, diags) =
            params(json!([{"name": "1x", "type": "int", "colour": 1}, {"type": "string"}]));
        assert_eq!(diags.len(), 4, "{diags:#?}");
    }

    fn validator() -> ArgValidator {
        let (p, _) = params(json!([
            {"name": "meal_type", "type": "string", "enum": ["breakfast", "lunch", "dinner"], "required": true},
            {"name": "dishes", "type": "array", "items": {"type": "string"}, "required": true},
            {"name": "portions", "type": "integer", "min_value": 1, "max_value": 5, "default": 1},
            {"name": "at", "type": "datetime"}
        ]));
        ArgValidator::new(&p).unwrap()
    }

    #[test]
    fn valid_arguments_get_defaults() {
        let args = validator()
            .validate(
                "save_meal",
                r#"{"meal_type":"lunch","dishes":["soup"],"at":null}"#,
            )
            .unwrap();
        assert_eq!(
            args,
            json!({"meal_type": "lunch", "dishes": ["soup"], "portions": 1, "at": null})
        );
    }

    #[test]
    fn argument_errors_are_named_per_parameter() {
        let v = validator();
        let err = v.validate("save_meal", "{not json").unwrap_err();
        assert_eq!(err.code, ErrorCode::ToolArgsParseError);
        let err = v.validate("save_meal", "[1]").unwrap_err();
        assert_eq!(err.code, ErrorCode::ToolArgsParseError);
        let err = v
            .validate(
                "save_meal",
                r#"{"meal_type":"brunch","portions":9,"at":"yesterday","dishs":[]}"#,
            )
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArguments);
        let details = err.details.unwrap();
        let names: Vec<&str> = details
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["parameter"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["at", "dishes", "dishs", "meal_type", "portions"]);
        assert!(
            err.message.contains("did you mean `dishes`?"),
            "{}",
            err.message
        );
        assert!(err.message.contains("date-time"), "{}", err.message);
    }

    /// The arguments' object is read as any JSON is: text after it, a second object or an
    /// unfinished one is not valid JSON; a repeated key keeps its last value; space before it
    /// is fine.
    #[test]
    fn the_arguments_object_is_read_as_json_is() {
        let v = validator();
        for bad in [
            r#"{"meal_type":"lunch","dishes":[]} x"#,
            r#"{"meal_type":"lunch"}{"dishes":[]}"#,
            r#"{"meal_type":"lunch","#,
            r#"{"meal_type" "lunch"}"#,
        ] {
            let err = v.validate("save_meal", bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::ToolArgsParseError, "{bad}");
            assert!(err.message.contains("not valid JSON"), "{}", err.message);
        }
        let args = v
            .validate(
                "save_meal",
                " \n {\"meal_type\":\"breakfast\",\"dishes\":[\"egg\"],\"meal_type\":\"dinner\"} ",
            )
            .unwrap();
        assert_eq!(
            args,
            json!({"meal_type": "dinner", "dishes": ["egg"], "portions": 1, "at": null})
        );
        let err = v.validate("save_meal", "\"lunch\"").unwrap_err();
        assert_eq!(err.code, ErrorCode::ToolArgsParseError);
    }
}
