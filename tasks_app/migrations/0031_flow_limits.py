"""Flow control: a task's concurrency limits (in all, per key) and rate limits (in all, per
key) with the payload field its runs' keys come from; a run's key, why it is held back and the
start a rate reserved for it; the per-key state (``FlowKey``). The release's index leaves held
runs out (run_pending_due_idx), which have their own (run_held_idx). store.schema_sql() as it
then was applied again (frozen in sql/0031_flow_limits.sql: the flow-control functions), its
SCHEMA_SHA256 recorded; going back applies 0030's copy again.
"""

from pathlib import Path

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models

import tasks_app.vocabulary.validation

# store.schema_sql() as this migration applied it (frozen), and its sha256.
SCHEMA_FILE = Path(__file__).parent / "sql" / "0031_flow_limits.sql"
SCHEMA_SHA256 = "a35f4c581a200df78d162aac0d1b91ee70484add2ae47888095e343b5faef09a"
PREVIOUS = Path(__file__).parent / "sql" / "0030_run_cancel_request.sql"


class Migration(migrations.Migration):

    dependencies = [
        ('django_celery_beat', '0019_alter_periodictasks_options'),
        ('tasks_app', '0030_run_cancel_request'),
    ]

    operations = [
        migrations.CreateModel(
            name='FlowKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('per_key', models.BooleanField()),
                ('key', models.CharField(blank=True, max_length=200)),
                ('next_start_at', models.DateTimeField(blank=True, null=True)),
                ('last_turn_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.RemoveIndex(
            model_name='run',
            name='run_pending_due_idx',
        ),
        migrations.AddField(
            model_name='run',
            name='flow_key',
            field=models.CharField(blank=True, db_default='', default='', max_length=200),
        ),
        migrations.AddField(
            model_name='run',
            name='held',
            field=models.CharField(blank=True, choices=[('concurrency', 'Waiting for a free slot (concurrency limit)'), ('rate', 'Waiting for its reserved start (rate limit)')], db_default='', default='', max_length=12),
        ),
        migrations.AddField(
            model_name='run',
            name='not_before',
            field=models.DateTimeField(blank=True, help_text='Held by a rate limit: the start it reserved.', null=True),
        ),
        migrations.AddField(
            model_name='task',
            name='concurrency_limit',
            field=models.PositiveIntegerField(blank=True, help_text='At most this many runs of the task at once, across every worker.', null=True, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(100000)]),
        ),
        migrations.AddField(
            model_name='task',
            name='concurrency_limit_per_key',
            field=models.PositiveIntegerField(blank=True, help_text='At most this many runs with the same key at once (needs flow_key).', null=True, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(100000)]),
        ),
        migrations.AddField(
            model_name='task',
            name='flow_key',
            field=models.CharField(blank=True, db_default='', default='', help_text="The payload field (a @task function's argument) whose value is a run's key for the per-key limits, e.g. customer_id.", max_length=100, validators=[django.core.validators.RegexValidator('^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z0-9_]+)*$', "Use a payload field name (letters, digits and '_'), or a dotted path such as customer.id.")]),
        ),
        migrations.AddField(
            model_name='task',
            name='rate_limit',
            field=models.CharField(blank=True, db_default='', default='', help_text='At most this many starts per period across every worker: 10/s, 100/m, 1000/h, 5000/d.', max_length=20, validators=[django.core.validators.RegexValidator('^([1-9][0-9]{0,5})/([smhd])$', 'Use <starts>/<period>: a whole number from 1 to 999999, then /s, /m, /h or /d (e.g. 10/s, 100/m).')]),
        ),
        migrations.AddField(
            model_name='task',
            name='rate_limit_per_key',
            field=models.CharField(blank=True, db_default='', default='', help_text='The same per key (needs flow_key).', max_length=20, validators=[django.core.validators.RegexValidator('^([1-9][0-9]{0,5})/([smhd])$', 'Use <starts>/<period>: a whole number from 1 to 999999, then /s, /m, /h or /d (e.g. 10/s, 100/m).')]),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('held', ''), ('status', 'pending')), fields=['due_at'], name='run_pending_due_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('status', 'pending'), models.Q(('held', ''), _negated=True)), fields=['task', 'due_at'], name='run_held_idx'),
        ),
        migrations.AddConstraint(
            model_name='task',
            constraint=models.CheckConstraint(condition=models.Q(('concurrency_limit__isnull', True), models.Q(('concurrency_limit__gte', 1), ('concurrency_limit__lte', 100000)), _connector='OR'), name='task_concurrency_limit_range', violation_error_message='concurrency_limit must be between 1 and 100000'),
        ),
        migrations.AddConstraint(
            model_name='task',
            constraint=models.CheckConstraint(condition=models.Q(('concurrency_limit_per_key__isnull', True), models.Q(('concurrency_limit_per_key__gte', 1), ('concurrency_limit_per_key__lte', 100000)), _connector='OR'), name='task_concurrency_limit_per_key_range', violation_error_message='concurrency_limit_per_key must be between 1 and 100000'),
        ),
        migrations.AddField(
            model_name='flowkey',
            name='task',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tasks_app.task'),
        ),
        migrations.AddConstraint(
            model_name='flowkey',
            constraint=models.UniqueConstraint(fields=('task', 'per_key', 'key'), name='flow_key_unique'),
        ),
        migrations.RunSQL(
            SCHEMA_FILE.read_text(encoding="utf-8"), PREVIOUS.read_text(encoding="utf-8")
        ),
    ]
