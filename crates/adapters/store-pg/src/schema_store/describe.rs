//! Tables as the catalog describes them, as JSON built by PostgreSQL: columns,
//! indexes, foreign keys both ways; and the facts a change is planned from.

/// Every table of schema `$1` (only table `$2` when not null) with its
/// columns, indexes, foreign keys and the foreign keys pointing at it.
pub(crate) const TABLES_SQL: &str = r#"
SELECT c.relname::text AS name, r.id AS resource_id,
  (SELECT coalesce(json_agg(json_build_object(
      'name', a.attname,
      'dataType', format_type(a.atttypid, a.atttypmod),
      'nullable', NOT a.attnotnull,
      'default', pg_get_expr(d.adbin, d.adrelid),
      'identity', CASE a.attidentity WHEN 'a' THEN 'ALWAYS' WHEN 'd' THEN 'BY DEFAULT' END,
      'primaryKey', EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p' AND a.attnum = ANY (k.conkey)),
      'unique', EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'u' AND k.conkey = ARRAY[a.attnum]),
      'check', (SELECT pg_get_expr(k.conbin, k.conrelid) FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'c' AND k.conkey[1] = a.attnum ORDER BY k.conname LIMIT 1),
      'checkMessage', (SELECT r.check_messages ->> k.conname FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'c' AND k.conkey[1] = a.attnum ORDER BY k.conname LIMIT 1),
      'foreignKey', (SELECT json_build_object('targetSchema', tn.nspname, 'targetTable', tc.relname, 'targetColumn', ta.attname,
                       'onDelete', CASE k.confdeltype WHEN 'a' THEN 'NO ACTION' WHEN 'r' THEN 'RESTRICT' WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT' END)
                     FROM pg_constraint k JOIN pg_class tc ON tc.oid = k.confrelid JOIN pg_namespace tn ON tn.oid = tc.relnamespace
                     JOIN pg_attribute ta ON ta.attrelid = k.confrelid AND ta.attnum = k.confkey[1]
                     WHERE k.conrelid = c.oid AND k.contype = 'f' AND k.conkey = ARRAY[a.attnum] LIMIT 1)
    ) ORDER BY a.attnum), '[]'::json)
   FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
  (SELECT coalesce(json_agg(svc_index ORDER BY svc_index ->> 'name'), '[]'::json) FROM (
     SELECT json_build_object(
       'name', ic.relname,
       'columns', CASE
         WHEN am.amname = 'gin' AND pg_get_indexdef(i.indexrelid) LIKE '%(to_tsvector(''simple''::regconfig, %' THEN
           json_build_array((regexp_match(pg_get_indexdef(i.indexrelid), 'to_tsvector\(''simple''::regconfig, "?([^")]+)"?\)'))[1])
         WHEN 0 = ANY (i.indkey::int2[]) THEN
           (SELECT coalesce(json_agg(DISTINCT ea.attname), '[]'::json) FROM pg_depend dep
              JOIN pg_attribute ea ON ea.attrelid = dep.refobjid AND ea.attnum = dep.refobjsubid
            WHERE dep.classid = 'pg_class'::regclass AND dep.objid = i.indexrelid AND dep.refobjid = c.oid AND dep.refobjsubid > 0)
         ELSE
           (SELECT coalesce(json_agg(CASE WHEN k.opt & 1 = 1 THEN '-' ELSE '' END || ka.attname ORDER BY k.ord), '[]'::json)
              FROM unnest(i.indkey::int2[], i.indoption::int2[]) WITH ORDINALITY AS k(attnum, opt, ord)
              JOIN pg_attribute ka ON ka.attrelid = c.oid AND ka.attnum = k.attnum
             WHERE k.ord <= i.indnkeyatts)
         END,
       'unique', i.indisunique,
       'method', CASE WHEN am.amname = 'gin' AND pg_get_indexdef(i.indexrelid) LIKE '%(to_tsvector(''simple''::regconfig, %' THEN 'search' ELSE am.amname::text END,
       'where', CASE WHEN i.indpred IS NULL THEN NULL ELSE coalesce(r.index_filters -> ic.relname::text, to_jsonb(pg_get_expr(i.indpred, i.indrelid))) END,
       'valid', i.indisvalid) AS svc_index
     FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
     WHERE i.indrelid = c.oid) AS listed) AS indexes,
  (SELECT coalesce(json_agg(json_build_object('column', fa.attname, 'targetSchema', tn.nspname, 'targetTable', tc.relname, 'targetColumn', ta.attname,
            'onDelete', CASE k.confdeltype WHEN 'a' THEN 'NO ACTION' WHEN 'r' THEN 'RESTRICT' WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT' END)
            ORDER BY fa.attname, k.conname), '[]'::json)
   FROM pg_constraint k JOIN pg_attribute fa ON fa.attrelid = k.conrelid AND fa.attnum = k.conkey[1]
   JOIN pg_class tc ON tc.oid = k.confrelid JOIN pg_namespace tn ON tn.oid = tc.relnamespace
   JOIN pg_attribute ta ON ta.attrelid = k.confrelid AND ta.attnum = k.confkey[1]
   WHERE k.conrelid = c.oid AND k.contype = 'f') AS foreign_keys,
  (SELECT coalesce(json_agg(json_build_object('schema', sn.nspname, 'table', sc.relname, 'column', fa.attname,
            'targetSchema', n.nspname, 'targetTable', c.relname, 'targetColumn', ta.attname,
            'onDelete', CASE k.confdeltype WHEN 'a' THEN 'NO ACTION' WHEN 'r' THEN 'RESTRICT' WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT' END)
            ORDER BY sn.nspname, sc.relname, fa.attname), '[]'::json)
   FROM pg_constraint k JOIN pg_class sc ON sc.oid = k.conrelid JOIN pg_namespace sn ON sn.oid = sc.relnamespace
   JOIN pg_attribute fa ON fa.attrelid = k.conrelid AND fa.attnum = k.conkey[1]
   JOIN pg_attribute ta ON ta.attrelid = k.confrelid AND ta.attnum = k.confkey[1]
   WHERE k.confrelid = c.oid AND k.contype = 'f') AS referenced_by
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN svc.resources r ON r.schema_name = n.nspname AND r.table_name = c.relname
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND ($2::text IS NULL OR c.relname = $2)
ORDER BY c.relname
"#;

/// The columns of table `$1` (a quoted qualified name) with what a change
/// of one is planned from.
pub(super) const FACTS_SQL: &str = "SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS data_type, \
    NOT a.attnotnull AS nullable, \
    EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = a.attrelid AND k.contype = 'p' AND a.attnum = ANY (k.conkey)) AS primary_key, \
    ARRAY(SELECT k.conname::text FROM pg_constraint k WHERE k.conrelid = a.attrelid AND k.contype = 'c' AND k.conkey = ARRAY[a.attnum] ORDER BY k.conname) AS checks, \
    (SELECT k.conname::text FROM pg_constraint k WHERE k.conrelid = a.attrelid AND k.contype = 'u' AND k.conkey = ARRAY[a.attnum] LIMIT 1) AS unique_name \
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
    WHERE a.attrelid = to_regclass($1) AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped \
    ORDER BY a.attnum";

/// Indexes of table `$1` but the primary key, with every column each
/// depends on (keys, expressions, predicate), and the stored filter.
pub(super) const INDEX_USAGE_SQL: &str = "SELECT ic.relname::text AS name, \
    ARRAY(SELECT a.attname::text FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid \
          WHERE d.classid = 'pg_class'::regclass AND d.objid = i.indexrelid AND d.refobjid = i.indrelid AND d.refobjsubid > 0 \
          ORDER BY a.attnum) AS columns, \
    (SELECT r.index_filters -> ic.relname::text FROM svc.resources r WHERE r.schema_name = $2 AND r.table_name = $3) AS filter \
    FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid \
    WHERE i.indrelid = to_regclass($1) AND NOT i.indisprimary";

/// Foreign keys of any table on a column of table `$1`.
pub(super) const REFERENCED_BY_SQL: &str = "SELECT sn.nspname || '.' || sc.relname AS source, a.attname::text AS column \
    FROM pg_constraint k JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = k.confkey[1] \
    JOIN pg_class sc ON sc.oid = k.conrelid JOIN pg_namespace sn ON sn.oid = sc.relnamespace \
    WHERE k.contype = 'f' AND k.confrelid = to_regclass($1)";
