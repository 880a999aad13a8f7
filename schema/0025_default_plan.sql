-- The default plan (DEFAULT_PLAN).
--
-- account_plans.plan now holds only a plan that billing or an operator set;
-- NULL means the instance's default plan, read from the configuration at
-- use, so that changing DEFAULT_PLAN moves every account nobody placed on a
-- plan. Rows written before keep the plan they hold: a free there may be an
-- operator's deliberate cap, which an upgrade must not lift. The unlimited
-- plan joins the allowed names.
ALTER TABLE account_plans ALTER COLUMN plan DROP NOT NULL;
ALTER TABLE account_plans ALTER COLUMN plan DROP DEFAULT;
ALTER TABLE account_plans DROP CONSTRAINT account_plans_plan;
ALTER TABLE account_plans ADD CONSTRAINT account_plans_plan CHECK (plan IN ('free', 'pro', 'business', 'unlimited'));
