"""Unique calls (docs/flow-control.md): ``Run.unique_key`` with one waiting run per task and
key (``run_unique_waiting_key``) and the index a key's window looks back through
(``run_unique_key_idx``); a task's ``unique_on``, ``unique_for_seconds`` and ``debounce``.
No SQL function changed: the frozen schema stays 0031's."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tasks_app', '0032_queue_pause'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='unique_key',
            field=models.CharField(blank=True, db_default='', default='', help_text='The key of the call that made this run; blank: none.', max_length=200),
        ),
        migrations.AddField(
            model_name='task',
            name='debounce',
            field=models.BooleanField(db_default=False, default=False, help_text='A call with the key of a waiting run replaces that run (the newest call wins) instead of returning it.'),
        ),
        migrations.AddField(
            model_name='task',
            name='unique_for_seconds',
            field=models.PositiveIntegerField(db_default=0, default=0, help_text='0: a key is held while its run waits. N: also for N seconds after the call that made the run; with debounce, a run waits N seconds after the newest call.', validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(31622400)]),
        ),
        migrations.AddField(
            model_name='task',
            name='unique_on',
            field=models.CharField(blank=True, db_default='', default='', help_text="Blank: calls are not deduplicated; a keyword argument or payload field whose value is a call's key; '*': the whole call's arguments.", max_length=100, validators=[django.core.validators.RegexValidator('^(\\*|[A-Za-z_][A-Za-z0-9_]*)$', "must be blank, '*' (the whole call's arguments) or the name of a keyword argument or payload field (letters, digits and '_', not starting with a digit)")]),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('unique_key', ''), _negated=True), fields=['task', 'unique_key', '-created_at'], name='run_unique_key_idx'),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.UniqueConstraint(condition=models.Q(('status__in', ['pending', 'queued']), models.Q(('unique_key', ''), _negated=True)), fields=('task', 'unique_key'), name='run_unique_waiting_key'),
        ),
        migrations.AddConstraint(
            model_name='task',
            constraint=models.CheckConstraint(condition=models.Q(('unique_for_seconds__isnull', True), models.Q(('unique_for_seconds__gte', 0), ('unique_for_seconds__lte', 31622400)), _connector='OR'), name='task_unique_for_seconds_range', violation_error_message='unique_for_seconds must be between 0 and 31622400'),
        ),
    ]
